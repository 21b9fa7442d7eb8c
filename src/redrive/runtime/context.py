"""The job a handler is running, readable from inside it."""

from __future__ import annotations

from contextvars import ContextVar

from redrive.core.job import Job

_current: ContextVar[Job | None] = ContextVar("redrive_current_job", default=None)


def current_job() -> Job:
    """The job whose handler is calling; raises outside a handler."""
    job = _current.get()
    if job is None:
        raise LookupError("current_job() is only available inside a running task")
    return job
