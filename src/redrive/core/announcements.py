"""What an ending announces: the events of one ``Finished``, derived from it
alone, wherever the ending was decided (a worker's run, a cancel that won
over a retry, the reclaim of an expired lease). Metrics, logs, notifications
and alert rules hear every ending from these, so none is told one way by a
worker and another way (or not at all) by the store.

Pure: a list of (event name, payload) that the caller emits; the payload
keys are the catalogue's (``redrive.events.CATALOGUE``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from redrive.core.states import Status
from redrive.core.transitions import Cancellation, Completion, FailNow, Finished, Requeue, RetryLater

Announcement = tuple[str, dict[str, Any]]


def announcements(done: Finished, *, duration_s: float | None = None, wait_s: float | None = None,
                  wanted: Callable[[str], bool] | None = None) -> list[Announcement]:
    """The events ``done`` makes, in order. ``duration_s`` and ``wait_s``
    are the run's (None when no run of this process ended it: a reclaim).
    ``wanted(name)`` (optional) says whether anyone listens to an event, so
    no payload is built for nobody."""
    item = done.item
    if done.workflows:  # a step's ending that ended or blocked its workflow: rare, told after the job's own
        return [*announcements(replace(done, workflows=()), duration_s=duration_s, wait_s=wait_s, wanted=wanted),
                *_workflow_told(done, wanted)]
    if type(item) is Completion:  # one a job: its payload made in one go
        if wanted is not None and not wanted("job.succeeded"):
            return []
        return [("job.succeeded", {"job_id": str(item.lease.job_id), "task": done.task, "queue": done.queue,
                                   "attempt": done.attempt, "duration_s": duration_s, "wait_s": wait_s})]
    job = {"job_id": str(item.lease.job_id), "task": done.task, "queue": done.queue}

    def wants(name: str) -> bool:
        return wanted is None or wanted(name)

    told: list[Announcement] = []
    if done.by_reclaim and wants("job.reclaimed"):
        told.append(("job.reclaimed", {**job, "attempt": done.attempt, "status": str(done.status)}))
    if done.status is Status.CANCELLED:
        if wants("job.cancelled"):
            told.append(("job.cancelled", {**job, "by": done.cancelled_by}))
        return told
    match item:
        case RetryLater():
            if wants("job.retry_scheduled"):
                told.append(("job.retry_scheduled", {
                    **job, "attempt": done.attempt, "stage": done.stage, "error_code": item.error_code,
                    "upstream_status": item.meta.get("upstream_status"), "delay_s": item.delay.total_seconds(),
                    "duration_s": duration_s, "wait_s": wait_s}))
        case FailNow():
            error_class = item.error_class or item.error_code
            if wants("job.failed"):
                told.append(("job.failed", {
                    **job, "attempt": done.attempt, "stage": done.stage, "error_code": item.error_code,
                    "upstream_status": item.meta.get("upstream_status"), "error_class": error_class,
                    "retryable": item.retryable, "duration_s": duration_s, "wait_s": wait_s}))
            letter = {**job, "dead_letter_id": done.dead_letter_id, "error_class": error_class}
            if wants("job.dead_lettered"):
                told.append(("job.dead_lettered", {**letter, "stage": done.stage, "escalated": done.escalated}))
            if done.escalated and wants("job.escalated"):
                told.append(("job.escalated", letter))
        case Completion() | Cancellation() | Requeue():
            pass  # told above; a requeue is no ending (a reclaim's is told above)
    return told


def _workflow_told(done: Finished, wanted: Callable[[str], bool] | None) -> list[Announcement]:
    told: list[Announcement] = []
    for change in done.workflows:
        name = f"workflow.{change.became}"
        if wanted is None or wanted(name):
            payload: dict[str, Any] = {"workflow_id": str(change.workflow_id), "workflow": change.name,
                                       "job_id": str(done.lease.job_id)}
            if change.became == "blocked":
                payload["blocked"] = change.blocked
            told.append((name, payload))
    return told
