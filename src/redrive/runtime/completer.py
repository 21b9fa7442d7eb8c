"""Outcome writes: a run's ending becomes one fenced write item
(``outcome_item``), and the completer batches the items of many runs into
one statement per kind of outcome. What was written is announced on the
event stream (``announce_outcome``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta
from random import Random
from typing import Any, assert_never

from redrive.core.classify import Classifier, Failure
from redrive.core.job import JSON, Cancellation, Completion, FailNow, Job, Lease, RetryLater
from redrive.core.outcome import Cancelled, Failed, Retry, Succeeded
from redrive.core.retry import after_failure
from redrive.core.stages import Stage, resume_at
from redrive.core.states import Status
from redrive.declarations import Task
from redrive.errors import StoreError
from redrive.events import EventStream
from redrive.runtime.breakers import Refusal
from redrive.runtime.executor import Execution, stages_of
from redrive.runtime.offload import Offload
from redrive.store.port import Store

log = logging.getLogger("redrive.worker")

STORE_RETRY_PAUSE_S = 1.0

Item = Completion | RetryLater | FailNow | Cancellation


class Completer:
    """Batches fenced outcome writes: whatever finished while the last write
    was in flight goes out together, one statement per kind of outcome."""

    def __init__(self, call: Offload, store: Callable[[], Store]) -> None:
        self._call = call
        self._store = store
        self._pending: list[tuple[Item, Callable[[bool | None], None]]] = []
        self._ready = asyncio.Event()
        # Writes whose reply was lost: the commit may have happened all the same.
        self._uncertain: set[Lease] = set()

    def submit(self, item: Item, written: Callable[[bool | None], None]) -> None:
        """Queue the outcome's write; ``written(applied)`` follows once it is
        done: True, False if the lease was gone, or None when an earlier try
        lost its reply and may have committed (the caller reads the job to
        tell). A callback, not a future per job: a batch of hundreds is
        answered without waking hundreds of tasks."""
        self._pending.append((item, written))
        self._ready.set()

    async def run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            batch, self._pending = self._pending, []
            try:
                applied = await self._write([item for item, _ in batch])
            except StoreError as exc:
                # The writes stay fenced: retrying after the lease expired
                # changes nothing, so retrying is always safe.
                log.warning("writing %d outcomes failed, retrying: %s", len(batch), exc)
                self._uncertain.update(item.lease for item, _ in batch)
                self._pending[:0] = batch
                await asyncio.sleep(STORE_RETRY_PAUSE_S)
                self._ready.set()
                continue
            for item, written in batch:
                if item.lease in applied:
                    written(True)
                elif self._uncertain:
                    written(None if item.lease in self._uncertain else False)
                else:
                    written(False)
                self._uncertain.discard(item.lease)

    async def _write(self, items: list[Item]) -> set[Lease]:
        store = self._store()
        done = [item for item in items if isinstance(item, Completion)]
        retries = [item for item in items if isinstance(item, RetryLater)]
        failures = [item for item in items if isinstance(item, FailNow)]
        cancels = [item for item in items if isinstance(item, Cancellation)]
        applied: set[Lease] = set()
        if done:
            applied |= await self._call(store.jobs_complete, items=done)
        if retries:
            applied |= await self._call(store.jobs_retry, items=retries)
        if failures:
            applied |= await self._call(store.jobs_fail, items=failures)
        if cancels:
            applied |= await self._call(store.jobs_cancel, items=cancels)
        return applied


OUTCOME_NAMES = {Completion: "success", RetryLater: "retry", FailNow: "failure", Cancellation: "cancel"}


def landed(item: Item, attempts: int, now: Job | None) -> bool:
    """Whether the job as read now shows ``item``'s write: its ending, at the
    attempt that wrote it (a reclaim and a rerun would show another)."""
    if now is None or now.attempts != attempts or now.lease_token is not None:
        return False
    match item:
        case Completion():
            return now.status is Status.SUCCEEDED
        case FailNow():
            return now.status is Status.FAILED and now.error_code == item.error_code
        case Cancellation():
            return now.status is Status.CANCELLED
        case RetryLater():
            # queued again by this retry, or cancelled by a cancel it crossed
            return now.status in (Status.QUEUED, Status.SCHEDULED, Status.CANCELLED) \
                and now.last_error_code == item.error_code
    return False


def queue_wait(job: Job, lease_ttl: timedelta) -> float:
    """Seconds from when the job was due to when this attempt's lease was
    taken, both on the database's clock."""
    leased = job.lease_expires_at - lease_ttl if job.lease_expires_at else job.run_at
    return max(0.0, (leased - job.run_at).total_seconds())


def announce_outcome(events: EventStream, job: Job, item: Item, duration_s: float, lease_ttl: timedelta) -> None:
    name = _OUTCOME_EVENTS[type(item)]
    if not events.wants(name):
        return  # nobody listens: no payload is built
    if type(item) is Completion:  # one a job: its payload made in one go
        events.emit(name, job_id=str(job.id), task=job.task, queue=job.queue, attempt=job.attempts,
                    duration_s=duration_s, wait_s=queue_wait(job, lease_ttl))
        return
    base = {"job_id": str(job.id), "task": job.task, "queue": job.queue, "attempt": job.attempts}
    match item:
        case RetryLater():
            events.emit(name, **base, stage=item.stage or job.stage,
                        error_code=item.error_code, upstream_status=item.meta.get("upstream_status"),
                        delay_s=item.delay.total_seconds(), duration_s=duration_s, wait_s=queue_wait(job, lease_ttl))
        case FailNow():
            stage, error_class = item.stage or job.stage, item.error_class or item.error_code
            events.emit(name, **base, stage=stage, error_code=item.error_code,
                        upstream_status=item.meta.get("upstream_status"), error_class=error_class,
                        retryable=item.retryable, duration_s=duration_s, wait_s=queue_wait(job, lease_ttl))
        case Cancellation():
            events.emit(name, job_id=str(job.id), task=job.task, queue=job.queue, by=item.by)


_OUTCOME_EVENTS = {Completion: "job.succeeded", RetryLater: "job.retry_scheduled", FailNow: "job.failed",
                   Cancellation: "job.cancelled"}


async def announce_dead_letter(events: EventStream, store: Store, call: Offload, job: Job) -> None:
    """After a failure is written: its dead letter, and whether it escalated.
    The store decided both in the write; the failure's event says what it
    decided, so one read of the job's events (terminal failures only, and only
    while someone listens) tells it."""
    if not (events.wants("job.dead_lettered") or events.wants("job.escalated")):
        return
    try:
        history = await call(store.job_events_list, job_id=job.id)
    except StoreError as exc:
        log.warning("cannot announce the dead letter of job %s: %s", job.id, exc)
        return
    failed = next((e for e in reversed(history) if e.to_status is Status.FAILED), None)
    if failed is None:
        return
    meta = failed.meta
    letter = {"job_id": str(job.id), "task": job.task, "queue": job.queue,
              "dead_letter_id": meta.get("dead_letter_id"), "error_class": meta.get("error_class")}
    events.emit("job.dead_lettered", **letter, stage=meta.get("stage"), escalated=bool(meta.get("escalated")))
    if meta.get("escalated"):
        events.emit("job.escalated", **letter)


def outcome_item(job: Job, execution: Execution, duration_ms: int) -> Item:
    meta: dict[str, JSON] = {"duration_ms": duration_ms}
    match execution.outcome:
        case Succeeded(result=result):
            if execution.skipped:
                meta["skipped"] = "already_done"
            return Completion(lease=job.lease, result=result, meta=meta)
        case Retry(delay=delay, failure=failure):
            return RetryLater(
                lease=job.lease, delay=delay, error_code=failure.code,
                error_message=failure.message, meta=_failure_meta(meta, failure),
                stage=execution.stage, stage_attempts=execution.stage_attempts,
            )
        case Failed(failure=failure):
            return FailNow(
                lease=job.lease, error_code=failure.code, error_message=failure.message,
                meta=_failure_meta(meta, failure), stage=execution.stage,
                stage_attempts=execution.stage_attempts, error_class=failure.error_class,
                retryable=failure.retryable, stack=execution.stack, context=execution.context,
            )
        case Cancelled(by=by, reason=reason):
            if reason:
                meta["reason"] = reason
            return Cancellation(lease=job.lease, by=by, meta=meta)
    assert_never(execution.outcome)


def fail_fast(refusal: Refusal, job: Job, task: Task[Any, Any] | None, classifier: Classifier,
              rng: Random) -> Execution:
    """The attempt fails at once with the dependency's code, and the code's
    own retryability decides what follows, as for any failure: a retryable
    code (UPSTREAM_5XX) is retried by the task's policy, spending an attempt;
    a non-retryable one fails the job for good."""
    name = refusal.dependency.name
    # Dependency() refuses a fail-fast declaration without a fail_code.
    assert refusal.dependency.fail_code is not None
    code = classifier.taxonomy.require(refusal.dependency.fail_code)
    failure = Failure(code=refusal.dependency.fail_code, retryable=code.retryable,
                      message=f"dependency {name} is unavailable (circuit open)")
    stage = resume_at(stages_of(task, job), job.checkpoint) if task is not None else Stage(job.task)
    stage_attempts = {**job.stage_attempts, stage.name: job.stage_attempts.get(stage.name, 0) + 1}
    outcome = after_failure(failure, stage=stage, stage_attempts=stage_attempts[stage.name],
                            attempts=job.attempts, max_attempts=job.max_attempts, rng=rng)
    return Execution(outcome, stage=stage.name, stage_attempts=stage_attempts,
                     context={"dependency": name, "breaker": "open"} if isinstance(outcome, Failed) else {})


def _failure_meta(meta: dict[str, JSON], failure: Failure) -> dict[str, JSON]:
    extra: dict[str, JSON] = {"error_class": failure.error_class}
    if failure.upstream_status is not None:
        extra["upstream_status"] = failure.upstream_status
    return {**meta, **extra}
