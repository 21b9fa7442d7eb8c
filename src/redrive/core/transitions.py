"""How a running job ends, as values: what a worker (or the reclaim) asks
the store to write — a ``Finish``, one of five kinds — and what the store
answers it decided — a ``Finished``. Every store applies a batch of them with
``Store.jobs_finish`` in one transaction, fenced on each item's lease, and
the events a process announces are derived from the answer alone
(``redrive.announce``), so an ending the store decides by itself (a cancel
that wins over a retry, a lease that expired on the last attempt) is told
exactly as one a handler decided.

Pure: the constructors below build items from a run's ``Execution``; the
store decides the rest (dead letters, escalation, a cancel request found).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from random import Random
from typing import assert_never

from redrive.core.classify import Classifier, Failure
from redrive.core.job import JSON, Job, Lease
from redrive.core.outcome import Execution, Failed, Retry, Snoozed, Stopped, Succeeded
from redrive.core.retry import after_failure
from redrive.core.stages import Stage, resume_at
from redrive.core.states import Status
from redrive.core.workflow import NewWorkflow, WorkflowChange

# The code and message of a job failed because its lease kept expiring
# (its worker died or hung on its last allowed attempt).
LEASE_EXPIRED = "LEASE_EXPIRED"
LEASE_EXPIRED_MESSAGE = "its worker stopped renewing the lease and no attempt was left"

# The code and message of a job failed because the worker process running it
# died (SIGKILL, the OOM killer, a crash in a C extension) on its last
# allowed attempt, as its supervisor saw.
WORKER_CRASHED = "WORKER_CRASHED"
TIMEOUT = "TIMEOUT"  # a run past its time limit (the executor's soft one, or a hard one)
WORKER_CRASHED_MESSAGE = "its worker process died while running it and no attempt was left"

# The code of a job whose stored row a claim could not use as written (a
# value from before the enqueue checks refused it, or written by hand): it
# fails alone, its dead letter says why, and the rest of its batch runs.
JOB_UNREADABLE = "JOB_UNREADABLE"

# A task asked to run later (``redrive.Snooze``), and the code of a job that
# asked more often than its task allows.
SNOOZED = "snoozed"
SNOOZE_LIMIT = "SNOOZE_LIMIT"

# Why a job went back to the queue when nobody says otherwise.
SHUTDOWN: Mapping[str, JSON] = {"reason": "shutdown"}


# Not frozen, as ``Finished`` below: a worker makes one a job, and a frozen
# one took 0.6 µs to make instead of 0.3. Nobody changes one.
@dataclass(slots=True)
class Completion:
    """running -> succeeded with a result; the workflows the run spawned
    (``redrive.spawn``) are created in the same transaction, or not at all."""

    lease: Lease
    result: JSON
    meta: Mapping[str, JSON] = field(default_factory=dict)
    spawned: tuple[NewWorkflow, ...] = ()


@dataclass(frozen=True, slots=True)
class RetryLater:
    """running -> queued, due after ``delay``, the error kept as the last one.
    A job whose cancel was asked while it ran ends cancelled instead: its
    worker may not have seen the request before it wrote this."""

    lease: Lease
    delay: timedelta
    error_code: str
    error_message: str
    meta: Mapping[str, JSON] = field(default_factory=dict)
    stage: str | None = None  # None: unchanged
    stage_attempts: Mapping[str, int] | None = None  # None: unchanged


@dataclass(frozen=True, slots=True)
class FailNow:
    """running -> failed for good; its dead letter is written with it
    (escalated when the job's previous letter was replayed and this is the
    same non-retryable error_class)."""

    lease: Lease
    error_code: str
    error_message: str
    meta: Mapping[str, JSON] = field(default_factory=dict)
    stage: str | None = None  # None: unchanged
    stage_attempts: Mapping[str, int] | None = None  # None: unchanged
    error_class: str | None = None  # None: the error code
    retryable: bool = False  # whether the code was retryable (a spent budget) or not
    stack: str | None = None  # redacted
    context: Mapping[str, JSON] = field(default_factory=dict)  # sanitized


@dataclass(frozen=True, slots=True)
class Cancellation:
    """running -> cancelled: its worker stopped it on request."""

    lease: Lease
    by: str  # who asked; "task" when the task cancelled itself
    meta: Mapping[str, JSON] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Requeue:
    """running -> queued, due after ``delay``: on shutdown or while a breaker
    holds the job (``refund``: the dispatch is given back, no attempt spent),
    or by the reclaim of an expired lease (the attempt stays spent)."""

    lease: Lease
    delay: timedelta = timedelta(0)
    meta: Mapping[str, JSON] = field(default_factory=lambda: dict(SHUTDOWN))
    refund: bool = True


Finish = Completion | RetryLater | FailNow | Cancellation | Requeue


# Not frozen: a frozen dataclass is three times slower to make, and a worker
# gets one a job. Nobody changes one.
@dataclass(slots=True)
class Finished:
    """What the store wrote for one ``Finish`` whose lease still held: the
    item it applied (for a reclaim, the one the store made), the job's status
    after it, the attempt that ended, the job's stage, and what the store
    decided on its own — the dead letter (and whether it escalated), the
    cancel request that ended the job instead of its retry, and what the
    ending did to the job's workflow."""

    item: Finish
    task: str
    queue: str
    status: Status
    attempt: int
    stage: str | None = None
    dead_letter_id: int | None = None
    escalated: bool = False
    cancelled_by: str | None = None  # a cancel ended the job: who asked
    workflows: tuple[WorkflowChange, ...] = ()  # what this ending did to its workflow, told once

    @property
    def lease(self) -> Lease:
        return self.item.lease

    @property
    def by_reclaim(self) -> bool:
        """The store ended this run itself: its lease expired."""
        return by_reclaim(self.item)


def by_reclaim(item: Finish) -> bool:
    """Whether ``item`` is the store's own ending of a lease it took back
    (``taken_back``). Only these end a lease past its expiry: every store
    refuses a holder's write once its lease has run out, whether or not the
    reclaim has taken the job yet."""
    return item.meta.get("reason") in ("lease_expired", "worker_crashed", "worker_killed")


KINDS: Mapping[type, str] = {Completion: "complete", RetryLater: "retry", FailNow: "fail",
                             Cancellation: "cancel", Requeue: "requeue"}


def ends_as(item: Finish, *, cancel_asked_by: str | None) -> tuple[Status, str | None]:
    """The status ``item`` leaves its job in, and who cancelled it if a
    cancel won: a retry crossing a cancel request ends the job cancelled."""
    match item:
        case Completion():
            return Status.SUCCEEDED, None
        case FailNow():
            return Status.FAILED, None
        case Cancellation():
            return Status.CANCELLED, item.by
        case RetryLater():
            if cancel_asked_by is not None:
                return Status.CANCELLED, cancel_asked_by
            return Status.QUEUED, None  # queued even when not due yet, as a retry always was
        case Requeue():
            return Status.QUEUED, None
    assert_never(item)


def taken_back(lease: Lease, worker: str | None, *, last: bool, crashed: bool = False,
               bystander: bool = False) -> Finish:
    """How every store ends a lease it takes back: one that expired, or
    (``crashed``) one held by a worker process seen dead, at once rather than
    a TTL later. With attempts left the job goes back to the queue, its
    attempt spent (a job that kills its worker must not loop for ever); on
    the last it fails, with a dead letter. A ``bystander`` was held by a
    process its supervisor killed for another job's overrun: it did nothing
    wrong, so it goes back with its attempt refunded, whatever is left."""
    if bystander:
        return Requeue(lease, meta={"reason": "worker_killed", "worker": worker})
    reason = "worker_crashed" if crashed else "lease_expired"
    meta: dict[str, JSON] = {"reason": reason, "worker": worker}
    if not last:
        return Requeue(lease, meta=meta, refund=False)
    code, message = (WORKER_CRASHED, WORKER_CRASHED_MESSAGE) if crashed else (LEASE_EXPIRED, LEASE_EXPIRED_MESSAGE)
    return FailNow(lease=lease, error_code=code, error_message=message, error_class=code, retryable=False,
                   meta=meta, context={"worker": worker})


def set_aside(lease: Lease, problem: str) -> FailNow:
    """How every store fails a claimed job it cannot run as stored."""
    return FailNow(lease=lease, error_code=JOB_UNREADABLE, error_message=f"the stored job cannot be run: {problem}",
                   error_class=JOB_UNREADABLE, retryable=False, meta={"reason": "unreadable"})



def finish_of(lease: Lease, execution: Execution, duration_ms: int, wait_ms: int | None = None) -> Finish:
    """The write that records how the run holding ``lease`` ended: how long it
    ran and (when known) how long it waited once due, both kept in its
    rollups. The lease, not the job: a worker holds its run's lease already,
    and a job builds a new one each time it is asked."""
    meta: dict[str, JSON] = {"duration_ms": duration_ms}
    if wait_ms is not None:
        meta["wait_ms"] = wait_ms
    if execution.told:  # what the task said (add_context: a gateway's status), apart from the engine's keys
        meta["context"] = execution.told
    match execution.outcome:
        case Succeeded(result=result):
            if execution.skipped:
                meta["skipped"] = "already_done"
            return Completion(lease, result, meta, execution.spawned)  # (positional: a worker builds one a job)
        case Retry(delay=delay, failure=failure):
            return RetryLater(
                lease=lease, delay=delay, error_code=failure.code,
                error_message=failure.message, meta=_failure_meta(meta, failure),
                stage=execution.stage, stage_attempts=execution.stage_attempts,
            )
        case Failed(failure=failure):
            return FailNow(
                lease=lease, error_code=failure.code, error_message=failure.message,
                meta=_failure_meta(meta, failure), stage=execution.stage,
                stage_attempts=execution.stage_attempts, error_class=failure.error_class,
                retryable=failure.retryable, stack=execution.stack, context=execution.context,
            )
        case Stopped(by=by, reason=reason):
            if reason:
                meta["reason"] = reason
            return Cancellation(lease=lease, by=by, meta=meta)
        case Snoozed(delay=delay, count=count):
            # back to the queue with the attempt given back: a snooze is no attempt
            meta.update(reason=SNOOZED, snoozes=count, delay_ms=round(delay.total_seconds() * 1000))
            return Requeue(lease, delay, meta, refund=True)
    assert_never(execution.outcome)


def fail_fast(job: Job, *, dependency: str, fail_code: str, stages: Sequence[Stage], classifier: Classifier,
              rng: Random, for_good: bool = False) -> Execution:
    """A dependency whose breaker is open and that fails fast: the attempt
    fails at once with the dependency's code, and the code's own
    retryability decides what follows, as for any failure: a retryable code
    (UPSTREAM_5XX) is retried by the task's policy, spending an attempt; a
    non-retryable one fails the job for good, and so does any code ``for_good``.
    ``stages`` are the task's (a one-stage pipeline for a plain task)."""
    code = classifier.taxonomy.require(fail_code)
    failure = Failure(code=fail_code, retryable=code.retryable and not for_good,
                      message=f"dependency {dependency} is unavailable (circuit open)")
    return failed_outside(job, failure, stages=stages, rng=rng,
                          context={"dependency": dependency, "breaker": "open"})


def overran(job: Job, *, seconds: float, stages: Sequence[Stage], rng: Random) -> Execution:
    """A run past its task's hard time limit, whose worker process was
    killed for it: the retryable ``TIMEOUT``, retried by the task's policy."""
    failure = Failure(code=TIMEOUT, retryable=True,
                      message=f"task {job.task} ran past its hard time limit of {seconds:g}s: "
                              "its worker process was killed")
    return failed_outside(job, failure, stages=stages, rng=rng, context={"hard_timeout_s": seconds})


def failed_outside(job: Job, failure: Failure, *, stages: Sequence[Stage], rng: Random,
                   context: dict[str, JSON]) -> Execution:
    """An attempt failed by the engine rather than by the task's code (a
    breaker, a hard limit): the stage the job would resume at spends one
    attempt, and its policy says retry or fail (``context`` goes with a
    failure for good)."""
    stage = resume_at(stages, job.checkpoint)
    stage_attempts = {**job.stage_attempts, stage.name: job.stage_attempts.get(stage.name, 0) + 1}
    outcome = after_failure(failure, stage=stage, stage_attempts=stage_attempts[stage.name],
                            attempts=job.attempts, max_attempts=job.max_attempts, rng=rng)
    return Execution(outcome, stage=stage.name, stage_attempts=stage_attempts,
                     context=context if isinstance(outcome, Failed) else {})


def _failure_meta(meta: dict[str, JSON], failure: Failure) -> dict[str, JSON]:
    extra: dict[str, JSON] = {"error_class": failure.error_class}
    if failure.upstream_status is not None:
        extra["upstream_status"] = failure.upstream_status
    return {**meta, **extra}
