"""The drain app's tasks, in a worker that SIGKILLs itself the first time it
reaches a named crash point (REDRIVE_TEST_CRASH_AT): points in the engine's
own work that a test cannot hit from outside by timing a kill.

- ``claimed``: a claim committed, the jobs not yet started;
- ``completing``: a run finished, its success not yet written;
- ``completed``: a success committed, the worker not yet told;
- ``retried``: a retry committed, the worker not yet told;
- ``heartbeat``: leases extended, the worker not yet told.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Callable
from typing import Any

from redrive import Transient, current_job
from redrive.core.transitions import Completion, RetryLater
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SQLiteStore
from tests.apps.drain import _record, app

POINT = os.environ.get("REDRIVE_TEST_CRASH_AT", "")


@app.task
def fail_once(key: str) -> dict:
    if current_job().attempts == 1:
        raise Transient("the first attempt fails")
    return _record(key)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _crash(method: str, *, before: bool = False, kind: type | None = None) -> None:
    """Die in ``method``, before it or once it answered something; with
    ``kind``, only when an ending of that kind is in the batch."""
    for store in (SQLiteStore, PostgresStore):
        real: Callable[..., Any] = getattr(store, method)

        @functools.wraps(real)
        def wrapped(self: Any, *args: Any, _real: Callable[..., Any] = real, **kwargs: Any) -> Any:
            ours = kind is None or any(isinstance(item, kind) for item in args[0])
            if before and ours:
                _die()
            answer = _real(self, *args, **kwargs)
            if answer and ours:  # only where there was something to lose
                _die()
            return answer

        setattr(store, method, wrapped)


if POINT == "claimed":
    _crash("jobs_claim")
elif POINT == "completing":
    _crash("jobs_finish", before=True, kind=Completion)
elif POINT == "completed":
    _crash("jobs_finish", kind=Completion)
elif POINT == "retried":
    _crash("jobs_finish", kind=RetryLater)
elif POINT == "heartbeat":
    _crash("leases_extend")
elif POINT:
    raise SystemExit(f"no crash point {POINT!r}")
