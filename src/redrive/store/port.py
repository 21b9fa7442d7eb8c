"""The storage seam. Every store passes one behaviour suite (tests/store).

Semantics every implementation keeps:

- Every state change writes a ``JobEvent`` in the same transaction.
- Writes about a running job (its ending, heartbeat, stage output) are
  fenced on its lease: an item whose token no longer matches changes nothing
  and is left out of the answer. Leases, not job ids: one worker may hold an
  old run and a new run of the same job, and must tell which of them still
  holds the job.
- A job's ending is one kind of write, ``jobs_finish``, answered with what
  the store decided (``core/transitions.py``); the reclaim answers the same
  way, so every ending is announced alike.
- Times that decide who may run what (run_at, lease expiry) come from the
  database's clock, never a worker's.
- Finished jobs (succeeded, failed, cancelled) leave the table the claim reads
  but stay readable through ``job_get`` and the read side's ``jobs_page``.

What operators read (pages of jobs, dead letters and outbox rows, queue
counts, facets, schedules) is the read side, ``store/reads.py``; every store
implements both protocols.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

from redrive.core.breaker import Breaker
from redrive.core.job import JSON, EnqueueResult, Job, JobEvent, Lease, NewJob, StageDone
from redrive.core.limits import Limits
from redrive.core.outbox import OutboxChange, OutboxRow
from redrive.core.progress import Progress
from redrive.core.transitions import Finish, Finished
from redrive.core.workflow import Upstream

ANY_QUEUE = "*"  # a wake-up that does not know which queue has new jobs

@dataclass(frozen=True, slots=True)
class Control:
    """What every worker obeys, read every half second: the queues paused for
    all workers, and who asked to cancel which of the running jobs asked about."""

    paused: Mapping[str, str]  # queue -> who paused it
    cancels: Mapping[UUID, str]  # job id -> who asked for its cancel


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """What a worker says of itself when it registers and at each heartbeat."""

    id: str
    host: str
    pid: int
    queues: Sequence[str]
    concurrency: int
    version: str
    running: int  # jobs it runs now
    jobs_run: int = 0  # jobs it has run to an end (or handed back) since it started
    memory_bytes: int | None = None  # its resident memory at this report
    orphaned: int = 0  # threads of sync runs abandoned past their limit that still run
    supervisor: str | None = None  # the supervisor that started it (``--processes``), if one did
    # A supervisor's own entry (it runs no job itself): its worker processes
    # now, how many it started in place of others, and the last it replaced.
    children: int | None = None
    restarts: int = 0
    replaced: Sequence[Mapping[str, JSON]] = ()  # {"pid", "worker", "why", "reason", "at"}, the latest last
    restarts_by: Mapping[str, int] = field(default_factory=dict)  # restarts by reason (REPLACED_BECAUSE)


# Why a supervisor replaced a worker process: it was killed for a run past
# its hard time limit, it left to be recycled (--max-jobs-per-child or
# --max-memory-per-child), or it died (a signal, a crash, an exit it chose not).
REPLACED_BECAUSE = ("hard_time_limit", "recycled", "died")

# Kept in the registry's one JSON column, apart from the columns every worker fills.
WORKER_DETAIL = ("jobs_run", "memory_bytes", "orphaned", "supervisor", "children", "restarts", "replaced",
                 "restarts_by")


def worker_detail(report: WorkerReport) -> dict[str, JSON]:
    return {name: getattr(report, name) for name in WORKER_DETAIL}


# A worker reports itself this often; one silent for three reports is stale,
# and one silent for a day is forgotten.
WORKER_REPORT_INTERVAL_S = 10.0
WORKER_STALE_AFTER_S = 3 * WORKER_REPORT_INTERVAL_S + 5
WORKER_FORGOTTEN_AFTER_S = 86_400


@dataclass(frozen=True, slots=True)
class BreakerEvent:
    name: str
    at: datetime
    from_state: str
    to_state: str
    reason: str
    by: str | None


class Store(Protocol):
    dialect: str

    def migrate(self) -> list[int]:
        """Apply pending migrations; return the versions applied."""

    def schema_current(self) -> bool:
        """Whether no migration is pending (a readiness check)."""

    def now(self) -> datetime:
        """The database's clock."""

    def jobs_insert(self, *, jobs: Iterable[NewJob], conn: Any = None) -> list[EnqueueResult]:
        """Create jobs, in order. ``jobs`` may be a generator that checks them
        as it goes: if it raises, nothing of the batch is written. A keyed job
        whose key is taken (``takes_over`` says no) is not created: the run its
        key points at comes back as a duplicate, or ``IdempotencyKeyReused`` is
        raised and nothing of the batch is written. With ``conn`` (the caller's
        open connection) they exist if and only if the caller commits."""

    def jobs_claim(
        self, *, queues: Sequence[str], limit: int, worker_id: str, lease_ttl: timedelta,
        blocked: Sequence[str] = (), limits: Limits | None = None,
    ) -> list[Job]:
        """Take up to ``limit`` due jobs by priority then run_at, each with a fresh
        lease, skipping jobs that need any of the ``blocked`` dependencies. With
        ``limits``, only the jobs that fit them, under a lock every claim with
        limits takes, and a permit per job and key (``core/limits.py``)."""

    def leases_extend(self, *, leases: Sequence[Lease], lease_ttl: timedelta) -> set[Lease]:
        """Heartbeat: push the expiry of held leases; return the leases still held."""

    def lease_check(self, *, lease: Lease, conn: Any = None) -> bool:
        """Whether ``lease`` still holds its job. With ``conn`` (the caller's
        connection, in a transaction of theirs) to this store's own database,
        the check runs inside that transaction and keeps the job's row from
        changing hands until the caller commits; otherwise it asks the store."""

    def jobs_finish(self, items: Sequence[Finish]) -> list[Finished]:
        """End running jobs, in one transaction: each item whose lease still
        holds its job is applied, the others change nothing and are left out
        of the answer (the same lease twice in a batch is applied once, the
        first). A failure writes its dead letter with it; a retry of a job
        whose cancel was asked while it ran ends the job cancelled instead.
        Each ending written adds to its minute's rollups in the same
        transaction (``core/rollups.rollup_tally``). The answer says what was
        written, in the order of ``items``."""

    def progress_save(self, *, lease: Lease, progress: Progress) -> bool:
        """Keep ``progress`` as the running job's latest (fenced on ``lease``:
        False, nothing kept, once the lease is gone). The worker calls it at
        most once a second per job (``core/progress.py``)."""

    def stages_save(self, *, items: Sequence[StageDone]) -> set[Lease]:
        """Record finished stages' output and counts on running jobs (fenced)."""

    def jobs_reclaim(self, *, limit: int = 500, worker_id: str | None = None,
                     bystanders: bool = False) -> list[Finished]:
        """Expired leases: back to queued, or failed with a dead letter when no
        attempt is left (``transitions.taken_back``), answered as
        ``jobs_finish`` answers. With ``worker_id`` (a worker process its
        supervisor saw die): that worker's leases instead, now, expired or
        not, ended as crashed (``WORKER_CRASHED`` on the last attempt); and
        with ``bystanders`` too (its supervisor killed it for another job's
        hard time limit, that job already ended) back to the queue with their
        attempts refunded."""

    def jobs_prune(self, *, older_than: timedelta, limit: int = 10_000) -> int:
        """Delete up to ``limit`` finished jobs that finished more than
        ``older_than`` ago (by the store's clock), oldest first, with their
        events, their handled dead letters and the idempotency keys that point
        at them (and any cancel request left on them). A job with an open dead
        letter stays. Returns how many went."""

    def rollups_compact(self) -> int:
        """Fold the rollups every ending adds to (core/rollups.py): shards
        together after ``SHARDS_FOR``, minutes into hours after
        ``MINUTES_FOR``, gone after ``KEEP``; how many rows were moved or
        dropped. Safe to run in every worker at once: a row moves once."""

    def control_read(self, *, job_ids: Sequence[UUID]) -> Control:
        """The paused queues, and the cancel requests among ``job_ids``."""

    def worker_report(self, *, report: WorkerReport) -> None:
        """Register the worker, or renew its heartbeat and running count; also
        forgets workers silent for WORKER_FORGOTTEN_AFTER_S."""

    def worker_remove(self, *, worker_id: str) -> None:
        """A worker that stopped cleanly leaves the registry."""

    def breaker_update(
        self, *, name: str, change: Callable[[Breaker, float], Breaker], by: str | None = None
    ) -> Breaker:
        """Read-modify-write one dependency's breaker, with no update lost:
        ``change`` gets the shared state (closed if new) and the database's
        clock (epoch seconds); each state change it makes is stored as an
        event. ``change`` may be called more than once (a store that writes
        only if no one wrote since its read decides again from what won):
        what its last call answered is what was written."""

    def breakers_list(self) -> tuple[dict[str, Breaker], float]:
        """Every breaker, and the database's clock (epoch seconds)."""

    def outbox_open(self, *, lease: Lease, key: str, token: str) -> OutboxRow | None:
        """The outbox row of ``key``, created ``pending`` if new. None when
        the lease is gone (fenced)."""

    def outbox_update(self, *, lease: Lease, key: str, change: OutboxChange) -> OutboxRow | None:
        """Apply one change to an existing row in one write; None when the lease is gone."""

    def schedule_checkpoint(self, *, name: str, now: datetime) -> datetime:
        """How far ``name`` has been fired; a schedule seen for the first time
        starts at ``now`` (nothing before it is caught up)."""

    def schedule_advance(self, *, name: str, to: datetime) -> None:
        """Move the checkpoint forward to ``to`` (never back)."""

    def job_get(self, *, job_id: UUID) -> Job | None: ...

    def step_parents(self, *, job_id: UUID) -> list[Upstream]:
        """What a running workflow step reads of its parents: each one's
        name, place in its fan-out, ending and result, by name and place."""

    def job_events_list(self, *, job_id: UUID, newest: int | None = None) -> list[JobEvent]:
        """Oldest first; with ``newest``, only that many of the latest."""

    def wakeups_subscribe(self, on_wake: Callable[[str], None]) -> Callable[[], None] | None:
        """Call ``on_wake(queue)`` when jobs may have become available (``ANY_QUEUE``
        when the store cannot tell which queue); return an unsubscribe function,
        or None when this store cannot push (workers poll)."""

    def finishes_subscribe(self, *, job_id: UUID, on_finish: Callable[[], None]) -> Callable[[], None]:
        """Call ``on_finish()`` when ``job_id`` may have ended (a hint, like a
        wake-up: the caller reads the job again); return the function that
        stops it. Waiting for a result costs the hot path nothing while
        nobody waits."""

    def close(self) -> None: ...
