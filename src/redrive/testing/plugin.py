"""redrive's pytest plugin, loaded by pytest wherever redrive is installed
(the ``pytest11`` entry point): the ``redrive_isolate`` fixture.

    def test_welcome(redrive_isolate):
        clock = redrive_isolate(app)          # app: your module-level App
        send_welcome.enqueue(42)
        assert drain(app, clock=clock).succeeded == 1

Nothing is imported from redrive until a test asks for the fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest


@pytest.fixture
def redrive_isolate() -> Iterator[Callable[..., Any]]:
    """``redrive_isolate(app, clock=None)`` points ``app`` at a fresh store
    in memory for this test (``redrive.testing.isolated``) and returns the
    ``Clock`` that store reads; the app is put back after the test."""
    from redrive.testing import isolated

    with ExitStack() as stack:
        yield lambda app, clock=None: stack.enter_context(isolated(app, clock=clock))
