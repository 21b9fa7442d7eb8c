"""Run one handler and turn however it ended into an Outcome; never raises."""

from __future__ import annotations

import contextvars
import json
import logging
from datetime import timedelta
from random import Random

from redrive.app import Task
from redrive.core.backoff import FullJitter
from redrive.core.job import Job
from redrive.core.outcome import Failed, Outcome, Succeeded
from redrive.core.retry import after_failure
from redrive.errors import Permanent, Transient
from redrive.runtime.context import _current
from redrive.runtime.threads import DaemonThreadPool

log = logging.getLogger("redrive.worker")

UNKNOWN_TASK = "UNKNOWN_TASK"
UNHANDLED = "BUG"
RESULT_NOT_JSON = "RESULT_NOT_JSON"
_MESSAGE_LIMIT = 500
_UNKNOWN_TASK_BACKOFF = FullJitter(initial=timedelta(seconds=5), cap=timedelta(minutes=5))


async def execute(task: Task | None, job: Job, *, threads: DaemonThreadPool, rng: Random) -> Outcome:
    if task is None:
        # Another deploy may know this task: let it come back rather than lose it.
        return after_failure(
            code=UNKNOWN_TASK, message=f"no task named {job.task!r} in this worker",
            retryable=True, attempts=job.attempts, max_attempts=job.max_attempts,
            backoff=_UNKNOWN_TASK_BACKOFF, rng=rng,
        )
    token = _current.set(job)
    try:
        if task.is_async:
            result = await task.fn(*job.args, **job.kwargs)
        else:
            context = contextvars.copy_context()
            result = await threads.run(lambda: context.run(task.fn, *job.args, **job.kwargs))
    except Transient as exc:
        return after_failure(
            code=exc.code, message=_one_line(exc.message), retryable=True,
            attempts=job.attempts, max_attempts=job.max_attempts,
            backoff=task.backoff, rng=rng, retry_after=exc.retry_after,
        )
    except Permanent as exc:
        return Failed(error_code=exc.code, error_message=_one_line(exc.message))
    except Exception as exc:
        log.exception("job %s (%s) raised an unclassified error", job.id, job.task)
        return Failed(error_code=UNHANDLED, error_message=_one_line(f"{type(exc).__name__}: {exc}"))
    finally:
        _current.reset(token)
    try:
        json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return Failed(error_code=RESULT_NOT_JSON, error_message=_one_line(f"the result is not JSON: {exc}"))
    return Succeeded(result)


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _MESSAGE_LIMIT else line[: _MESSAGE_LIMIT - 1] + "…"
