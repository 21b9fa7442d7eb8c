from __future__ import annotations

import pytest

from redrive.core.states import ACTIVE, TERMINAL, TRANSITIONS, Status, check_transition, is_legal
from redrive.errors import IllegalTransition


def test_every_state_is_either_active_or_terminal() -> None:
    assert ACTIVE | TERMINAL == set(Status) and not ACTIVE & TERMINAL


def test_terminal_states_only_leave_by_manual_retry() -> None:
    assert TRANSITIONS[Status.SUCCEEDED] == TRANSITIONS[Status.CANCELLED] == frozenset()
    assert TRANSITIONS[Status.FAILED] == {Status.QUEUED}


@pytest.mark.parametrize(
    ("before", "after", "legal"),
    [
        (None, Status.QUEUED, True),
        (None, Status.SCHEDULED, True),
        (None, Status.RUNNING, False),
        (Status.QUEUED, Status.RUNNING, True),
        (Status.SCHEDULED, Status.RUNNING, True),
        (Status.RUNNING, Status.QUEUED, True),
        (Status.RUNNING, Status.SUCCEEDED, True),
        (Status.QUEUED, Status.SUCCEEDED, False),
        (Status.SUCCEEDED, Status.QUEUED, False),
        (Status.CANCELLED, Status.QUEUED, False),
        (Status.RUNNING, Status.CANCELLED, True),  # its worker stopped it on request
        (Status.FAILED, Status.CANCELLED, False),
    ],
)
def test_transition_table(before, after, legal) -> None:
    assert is_legal(before, after) is legal
    if legal:
        check_transition(before, after)
    else:
        with pytest.raises(IllegalTransition, match=f"to {after}"):
            check_transition(before, after)
