"""A job that spawns children (the drain app's ``split``), in a worker that
SIGKILLs itself the first time it writes a success (REDRIVE_TEST_CRASH_AT):
``before`` the ending's transaction, ``inside`` it (the spawner's row moved
and its children written, nothing committed), or ``after`` its commit,
before the worker hears back."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from redrive.core.transitions import Completion
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SQLiteStore
from tests.apps.crash_hooks import crash as _crash
from tests.apps.crash_hooks import die as _die
from tests.apps.drain import app

POINT = os.environ.get("REDRIVE_TEST_CRASH_AT", "")
__all__ = ["app"]


def _inside() -> None:
    # In this worker the only workflows created are the ones a success spawned.
    for store, method in ((SQLiteStore, "_workflow_create"), (PostgresStore, "_workflow_write")):
        real: Callable[..., Any] = getattr(store, method)

        @functools.wraps(real)
        def created(self: Any, *args: Any, _real: Callable[..., Any] = real) -> Any:
            _real(self, *args)
            _die()  # the children are written in the ending's transaction: it never commits

        setattr(store, method, created)


if POINT == "before":
    _crash("jobs_finish", before=True, kind=Completion)
elif POINT == "inside":
    _inside()
elif POINT == "after":
    _crash("jobs_finish", kind=Completion)
elif POINT:
    raise SystemExit(f"no crash point {POINT!r}")
