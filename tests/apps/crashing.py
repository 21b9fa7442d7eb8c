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

import os

from redrive import Transient, current_job
from redrive.core.transitions import Completion, RetryLater
from tests.apps.crash_hooks import crash as _crash
from tests.apps.drain import _record, app

POINT = os.environ.get("REDRIVE_TEST_CRASH_AT", "")


@app.task
def fail_once(key: str) -> dict:
    if current_job().attempts == 1:
        raise Transient("the first attempt fails")
    return _record(key)


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
