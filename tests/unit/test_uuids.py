"""The UUIDs redrive builds a job at a time (``ids.uuid_of``,
``ids.uuid_from_text``) behave as the standard constructor's in every way a
caller can see."""

from __future__ import annotations

import copy
import pickle
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redrive.core import ids


@given(st.integers(min_value=0, max_value=2**128 - 1))
def test_a_uuid_from_its_number_or_its_text_is_the_standard_one(number: int) -> None:
    standard = uuid.UUID(int=number)
    for made in (ids.uuid_of(number), ids.uuid_from_text(str(standard))):
        assert made == standard and hash(made) == hash(standard)
        assert (str(made), made.hex, made.version, made.is_safe) == (
            str(standard), standard.hex, standard.version, uuid.SafeUUID.unknown)
        assert pickle.loads(pickle.dumps(made)) == standard and copy.deepcopy(made) == standard
        assert {made: 1}[standard] == 1


@pytest.mark.parametrize("text", ["", "not-a-uuid", "0123456789abcdef0123456789abcdeg"])
def test_text_that_is_not_hexadecimal_is_refused_as_uuid_refuses_it(text: str) -> None:
    with pytest.raises(ValueError):
        uuid.UUID(text)
    with pytest.raises(ValueError):
        ids.uuid_from_text(text)
