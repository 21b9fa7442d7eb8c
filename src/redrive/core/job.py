"""The job record, the event record, and the requests that create and finish jobs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from redrive.core.states import Status
from redrive.errors import IdempotencyKeyReused, IllegalTransition

JSON = Any

# Strict JSON text of a value (no NaN or infinities), or TypeError/ValueError.
# One shared encoder: json.dumps builds a new one per call when given options.
strict_json = json.JSONEncoder(allow_nan=False).encode
"""A value that survives ``json.dumps``: dict, list, str, int, float, bool or None."""

EVENT_COLUMNS: tuple[str, ...] = (
    "id",
    "job_id",
    "at",
    "from_status",
    "to_status",
    "attempt",
    "meta",
)


# Not frozen, though nothing may assign to a job's fields (change one with
# ``replace``): a frozen dataclass sets each of these 32 fields through
# object.__setattr__, which made building a job 2.6 µs instead of 0.3, and one
# is built per claimed and per enqueued job. Its lists and dicts were never
# frozen anyway.
@dataclass(slots=True)
class Job:
    id: UUID
    task: str
    queue: str
    args: list[JSON]
    kwargs: dict[str, JSON]
    status: Status
    priority: int
    run_at: datetime
    attempts: int
    max_attempts: int
    owner: str | None
    lease_token: UUID | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    last_error_code: str | None
    last_error_message: str | None
    error_code: str | None
    error_message: str | None
    result: JSON
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    failed_at: datetime | None
    stage: str | None  # where a retry or replay resumes
    stage_attempts: dict[str, int]  # runs of each stage that ended, in failure or success
    checkpoint: dict[str, JSON]  # output of each finished stage
    manual_retry_count: int
    first_failed_at: datetime | None  # first failure since enqueue or the last replay
    dependencies: list[str]  # circuit breakers the job's calls go through
    idempotency_key: str | None  # unique per (owner, task) with the version
    version: int  # a higher version under the same key is a new run

    @property
    def lease(self) -> Lease:
        if self.lease_token is None:
            raise IllegalTransition(f"job {self.id} is {self.status}, it holds no lease")
        return Lease(self.id, self.lease_token)


# The columns of both job tables, in schema order: the job's fields. The
# migrations must produce exactly these (a test checks it), the stores map rows
# through them, and rows are built positionally in this order.
JOB_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Job))


@dataclass(frozen=True, slots=True)
class JobEvent:
    id: int
    job_id: UUID
    at: datetime
    from_status: Status | None
    to_status: Status
    attempt: int
    meta: dict[str, JSON]


# Not frozen, for the reason Job is not: one is built per enqueued job, and
# a frozen dataclass's 14 object.__setattr__ calls were a fifth of building it.
@dataclass(slots=True)
class NewJob:
    """What enqueue asks the store to create. ``delay`` counts from the database's clock."""

    id: UUID
    task: str
    queue: str
    args: list[JSON]
    kwargs: dict[str, JSON]
    priority: int
    max_attempts: int
    owner: str | None = None
    run_at: datetime | None = None
    delay: timedelta | None = None
    stage: str | None = None
    dependencies: tuple[str, ...] = ()
    key: JobKey | None = None
    trace: Mapping[str, str] | None = None  # the enqueuing span's context (redrive.tracing)
    waits: bool = False  # a workflow step with parents: created pending (core/workflow.py)

    @property
    def created_meta(self) -> dict[str, JSON]:
        """The meta of the job's creation event: where its trace context travels."""
        return {"trace": dict(self.trace)} if self.trace else {}

    def created(self, *, status: Status, run_at: datetime, at: datetime) -> Job:
        """The job as the store just wrote it: the store answers only with what
        it decided (status, due time, its clock), so no payload travels back."""
        key = self.key
        # Positional, in JOB_COLUMNS order: binding 32 keywords costs more than
        # the rest of building the job (this runs once per enqueued job).
        return Job(
            self.id, self.task, self.queue, self.args, self.kwargs, status, self.priority, run_at,
            0, self.max_attempts, self.owner, None, None, None, None, None, None, None, None,
            at, at, None, None, None, self.stage, {}, {}, 0, None, list(self.dependencies),
            key.key if key else None, key.version if key else 1,
        )


@dataclass(frozen=True, slots=True)
class JobKey:
    """What makes an enqueue idempotent. ``kind`` "key": the caller's key, where
    the same version with other arguments is refused; "content": a hash of a
    content tuple, where a failed or cancelled twin is replaced by a new run."""

    key: str
    version: int
    fingerprint: str  # hash of the arguments
    kind: str = "key"


def takes_over(new: JobKey, version: int, twin: Status | None) -> bool:
    """Whether an enqueue under a key already taken makes a new run: a strictly
    higher version does; for content keys, so does a twin that failed or was
    cancelled. ``version`` and ``twin`` describe the run the key points at."""
    return new.version > version or (new.kind == "content" and twin in (Status.FAILED, Status.CANCELLED))


def refuse_reuse(new: JobKey, version: int, fingerprint: str) -> None:
    """The same key at the same version must ask for the same work."""
    if new.kind == "key" and new.version == version and new.fingerprint != fingerprint:
        raise IdempotencyKeyReused(
            f"idempotency key {new.key!r} (version {version}) was used with other arguments; "
            "use a new key or a higher version"
        )


class EnqueueResult:
    """The job an enqueue created, or the existing one (``duplicate=True``).

    A job the enqueue created is built from its request when ``job`` is first
    read. Most callers of a batch enqueue read no result, and a thousand jobs
    built for nobody were a thousand more objects for Python's garbage
    collector to sweep: in a process with a big heap (a web application's),
    its full collections were a third of a 1,000-job enqueue's time
    (bench/NOTES.md)."""

    __slots__ = ("_at", "_job", "_new", "_run_at", "_status", "duplicate")
    _job: Job | None
    _new: NewJob  # with what the store decided: set only where the job is built when read
    _status: Status
    _run_at: datetime
    _at: datetime
    duplicate: bool

    def __init__(self, job: Job, duplicate: bool = False) -> None:
        self._job = job
        self.duplicate = duplicate

    @classmethod
    def created(cls, new: NewJob, *, status: Status, run_at: datetime, at: datetime) -> EnqueueResult:
        """A new job as the store just wrote it (``NewJob.created``), built when read."""
        result = cls.__new__(cls)
        result._job, result._new, result._status, result._run_at, result._at = None, new, status, run_at, at
        result.duplicate = False
        return result

    @property
    def job(self) -> Job:
        if self._job is None:
            # two threads reading at once may each build one: equal jobs, the last one kept
            self._job = self._new.created(status=self._status, run_at=self._run_at, at=self._at)
        return self._job

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EnqueueResult):
            return NotImplemented
        return self.duplicate == other.duplicate and self.job == other.job

    def __repr__(self) -> str:
        return f"EnqueueResult(job={self.job!r}, duplicate={self.duplicate!r})"


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof that a worker holds a running job: every write about the job is fenced on it."""

    job_id: UUID
    token: UUID

    def __hash__(self) -> int:
        # A token is drawn for one lease of one job, so equal leases share it:
        # hashing it alone is enough, and leases key the worker's and the
        # stores' maps several times a job.
        return hash(self.token)


@dataclass(frozen=True, slots=True)
class StageDone:
    """Save a finished stage's output, fenced on the lease."""

    lease: Lease
    stage: str
    output: JSON
    stage_attempts: Mapping[str, int]
    next_stage: str | None


DEAD_LETTER_COLUMNS: tuple[str, ...] = (
    "id",
    "job_id",
    "task",
    "queue",
    "owner",
    "error_class",
    "error_code",
    "error_message",
    "retryable",
    "stage",
    "stage_attempts",
    "attempts",
    "last_stack",
    "context",
    "first_failure_at",
    "last_failure_at",
    "escalated",
    "previous_id",
    "replayed_at",
    "replayed_by",
    "replay_from",
    "notes",
    "resolved_at",
    "resolved_by",
)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A job that failed for good, as an operator triages it. Everything in it
    was redacted before it was stored; the job keeps its original arguments."""

    id: int
    job_id: UUID
    task: str
    queue: str
    owner: str | None
    error_class: str
    error_code: str
    error_message: str
    retryable: bool
    stage: str | None
    stage_attempts: dict[str, int]
    attempts: int
    last_stack: str | None
    context: dict[str, JSON]
    first_failure_at: datetime
    last_failure_at: datetime
    escalated: bool  # a replay failed again with the same non-retryable error_class
    previous_id: int | None  # this job's dead letter before the replay
    replayed_at: datetime | None
    replayed_by: str | None
    replay_from: str | None  # "stage" or "start"
    notes: list[dict[str, JSON]]  # {"at", "by", "text"}, oldest first
    # closed without a replay: handled by hand, or not worth running again
    resolved_at: datetime | None
    resolved_by: str | None

    @property
    def state(self) -> str:
        """open, replayed or resolved (``redrive.views`` also tells escalated letters apart)."""
        if self.replayed_at is not None:
            return "replayed"
        return "resolved" if self.resolved_at is not None else "open"


# What a dead letters list filters on: escalated letters are open ones whose
# replay failed again the same way.
LETTER_STATES: tuple[str, ...] = ("open", "replayed", "resolved", "escalated")


@dataclass(frozen=True, slots=True)
class DeadLetterFilter:
    error_class: str | None = None
    stage: str | None = None
    task: str | None = None
    owner: str | None = None
    state: str | None = None  # "open", "replayed", "resolved", "escalated"
    older_than: timedelta | None = None
    newer_than: timedelta | None = None
    job_id: UUID | None = None  # the letters of one job
