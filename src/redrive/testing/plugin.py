"""redrive's pytest plugin, loaded by pytest wherever redrive is installed
(the ``pytest11`` entry point): the ``redrive_isolate`` fixture.

    def test_welcome(redrive_isolate):
        clock = redrive_isolate(app)          # app: your module-level App
        send_welcome.enqueue(42)
        assert drain(app, clock=clock).succeeded == 1

Where the fresh store lives: ``redrive_isolate(app, database=...)`` for one
test, else ``--redrive-database`` or the ``redrive_database`` ini option,
else in memory (``redrive.testing.isolated`` lists the choices).

Nothing is imported from redrive until a test asks for the fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

_HELP = ("where redrive_isolate puts each test's store: memory (the default), sqlite (a new file), "
         "app (the app's own test database, emptied) or a postgresql:// test database URL (emptied)")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--redrive-database", default=None, help=_HELP)
    parser.addini("redrive_database", _HELP, default="memory")


@pytest.fixture
def redrive_isolate(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``redrive_isolate(app, clock=None, database=None)`` points ``app`` at
    a fresh store for this test (``redrive.testing.isolated``) and returns
    the ``Clock`` that store reads; the app is put back after the test."""
    from redrive.testing import isolated

    chosen = request.config.getoption("--redrive-database") or request.config.getini("redrive_database")
    with ExitStack() as stack:
        yield lambda app, clock=None, database=None: stack.enter_context(
            isolated(app, clock=clock, database=database or chosen))
