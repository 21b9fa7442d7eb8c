"""Run one handler and turn however it ended into an Outcome; never raises."""

from __future__ import annotations

import contextvars
import json
import logging
from datetime import datetime, timedelta, timezone
from random import Random

from redrive.app import Task
from redrive.core.backoff import FullJitter
from redrive.core.classify import Classifier, Failure, one_line
from redrive.core.job import Job
from redrive.core.outcome import Failed, Outcome, Succeeded
from redrive.core.retry import after_failure
from redrive.errors import Permanent, Transient
from redrive.runtime.context import _current
from redrive.runtime.threads import DaemonThreadPool

log = logging.getLogger("redrive.worker")

UNKNOWN_TASK = "UNKNOWN_TASK"
RESULT_NOT_JSON = "RESULT_NOT_JSON"
_UNKNOWN_TASK_BACKOFF = FullJitter(initial=timedelta(seconds=5), cap=timedelta(minutes=5))


async def execute(
    task: Task | None, job: Job, *, classifier: Classifier, threads: DaemonThreadPool, rng: Random
) -> Outcome:
    if task is None:
        # Another deploy may know this task: let it come back rather than lose it.
        failure = Failure(UNKNOWN_TASK, True, f"no task named {job.task!r} in this worker")
        return after_failure(failure, attempts=job.attempts, max_attempts=job.max_attempts,
                             backoff=_UNKNOWN_TASK_BACKOFF, rng=rng)
    classifier = task.classifier or classifier
    token = _current.set(job)
    try:
        if task.is_async:
            result = await task.fn(*job.args, **job.kwargs)
        else:
            context = contextvars.copy_context()
            result = await threads.run(lambda: context.run(task.fn, *job.args, **job.kwargs))
    except Exception as exc:
        failure = _classify(exc, classifier, job)
        return after_failure(failure, attempts=job.attempts, max_attempts=job.max_attempts,
                             backoff=task.backoff, rng=rng)
    finally:
        _current.reset(token)
    try:
        json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return Failed(error_code=RESULT_NOT_JSON, error_message=one_line(f"the result is not JSON: {exc}"))
    return Succeeded(result)


def _classify(exc: Exception, classifier: Classifier, job: Job) -> Failure:
    failure = classifier.exception(exc, now=datetime.now(timezone.utc))
    if failure.code == classifier.unclassified and not isinstance(exc, (Transient, Permanent)):
        log.exception("job %s (%s) raised an unclassified error", job.id, job.task)
    return failure

