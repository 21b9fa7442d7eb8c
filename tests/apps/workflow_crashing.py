"""A workflow's parent ending, in a worker that SIGKILLs itself the first
time it writes one (REDRIVE_TEST_CRASH_AT): ``before`` the ending's
transaction, ``inside`` it (the parent's row moved and its edges resolved,
nothing committed: on SQLite as the edges are resolved, on PostgreSQL once
the ending's statement ran, before its transaction commits),
or ``after`` its commit, before the worker hears back. The drain app's
``record`` task is both the parent and the child."""

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


def _inside_sqlite() -> None:
    real: Callable[..., Any] = SQLiteStore._settle

    @functools.wraps(real)
    def settle(self: Any, conn: Any, ended: Any, now: float) -> set[str]:
        ended = list(ended)
        woken = real(self, conn, ended, now)
        if ended:
            _die()  # the parent moved and its edges resolved: nothing committed yet
        return woken

    SQLiteStore._settle = settle  # type: ignore[method-assign]


def _inside_postgres() -> None:
    real: Callable[..., Any] = PostgresStore._finish_on

    @functools.wraps(real)
    def finish_on(self: Any, conn: Any, *batch: Any) -> Any:
        written = real(self, conn, *batch)
        if written:
            _die()  # the ending's statement ran (the child released in it): its transaction never commits
        return written

    PostgresStore._finish_on = finish_on  # type: ignore[method-assign]


if POINT == "before":
    _crash("jobs_finish", before=True, kind=Completion)
elif POINT == "inside":
    _inside_sqlite()
    _inside_postgres()
elif POINT == "after":
    _crash("jobs_finish", kind=Completion)
elif POINT:
    raise SystemExit(f"no crash point {POINT!r}")
