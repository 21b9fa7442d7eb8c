"""The memory store's state: its jobs, events, dead letters and the rest in
dicts under one lock, its clock, a job moved from one status to another
with its event, and reading one job."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, ClassVar
from uuid import UUID

from redrive.core.breaker import Breaker
from redrive.core.job import DeadLetter, Job, JobEvent, Lease
from redrive.core.outbox import OutboxRow
from redrive.core.progress import Progress
from redrive.core.states import TERMINAL, Status, check_transition
from redrive.core.workflow import EdgeState, WorkflowChange, edge_state, ended_as, step_status
from redrive.errors import ConfigError
from redrive.store.port import BreakerEvent
from redrive.store.reads import AuditEntry, WorkerInfo


def _counts(given: Any, job: Job) -> dict[str, int]:
    return dict(job.stage_attempts) if given is None else dict(given)


def _time_key(key: list[Any] | None) -> tuple[datetime, str] | None:
    """A (time, text) cursor key of this store's, or a ConfigError."""
    if key is None:
        return None
    try:
        return datetime.fromisoformat(key[0]), str(key[1])
    except (TypeError, ValueError):
        raise ConfigError("that cursor is not one this list gave out") from None


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError("that cursor is not one this list gave out")
    return value


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class Step:
    """A job's place in its workflow and its two counts (core/workflow.py)."""

    workflow_id: UUID
    name: str
    position: int | None
    waiting: int
    blocking: int = 0


@dataclass(slots=True)
class WorkflowRow:
    id: UUID
    name: str
    owner: str | None
    key: str | None
    graph: dict[str, list[tuple[str, str]]]
    created_at: datetime
    cancelled_at: datetime | None = None
    cancelled_by: str | None = None
    spawned_by: UUID | None = None
    open_steps: int = 0  # steps not ended: the ending of the last says how it ended


class Kept:
    """Every table of a database, as dicts under one lock."""

    dialect = "memory"
    _NO_LEASE: ClassVar[Mapping[str, None]] = {"lease_token": None, "lease_owner": None, "lease_expires_at": None}

    def __init__(self, *, clock: Callable[[], datetime] = _utcnow) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._jobs: dict[UUID, Job] = {}
        self._events: list[JobEvent] = []
        self._letters: dict[int, DeadLetter] = {}
        self._breakers: dict[str, Breaker] = {}
        self._breaker_events: list[BreakerEvent] = []
        self._listeners: list[Callable[[str], None]] = []
        self._keys: dict[tuple[str, str, str], tuple[int, UUID, str]] = {}
        self._outbox: dict[str, OutboxRow] = {}
        self._schedules: dict[str, datetime] = {}
        self._schedule_updated: dict[str, datetime] = {}
        self._schedule_paused: dict[str, str] = {}  # schedule: who paused it
        self._audit: list[AuditEntry] = []
        self._sessions: dict[str, tuple[str, datetime]] = {}  # id: (principal, expires at)
        self._finish_listeners: dict[UUID, list[Callable[[], None]]] = {}
        self._cancel_requests: dict[UUID, str] = {}  # running job -> who asked
        self._paused: dict[str, str] = {}  # queue -> who paused it
        self._workers: dict[str, WorkerInfo] = {}
        self._permits: list[tuple[str, UUID, UUID, datetime]] = []  # key, job, lease, started
        self._alerts: dict[str, str] = {}  # alert rule firing -> its incident
        self._woken: set[str] = set()  # queues where a step was released, told after the lock
        self._changes: dict[UUID, list[WorkflowChange]] = {}  # by the ended job they are told on
        self._progress: dict[UUID, Progress] = {}
        self._rollups: dict[tuple[int, str, str, str, int], int] = {}  # (at, queue, task, kind, bucket): n
        self._workflows: dict[UUID, WorkflowRow] = {}
        self._steps: dict[UUID, Step] = {}  # job id -> its place in a workflow
        self._edges: dict[UUID, dict[UUID, list[str]]] = {}  # parent -> child -> [policy, state]

    def migrate(self) -> list[int]:
        return []

    def schema_current(self) -> bool:
        return True

    def now(self) -> datetime:
        return self._clock()

    def _move(
        self, job: Job, to: Status, now: datetime, *, meta: dict | None = None, **changes: Any
    ) -> Job:
        check_transition(job.status, to)
        new = replace(job, status=to, updated_at=now, **changes)
        self._jobs[job.id] = new
        self._event(new, job.status, meta or {}, now)
        if to in TERMINAL:
            for on_finish in list(self._finish_listeners.get(job.id, ())):
                on_finish()
            if job.id in self._steps:
                self._step_ended(job.id, to)
            if job.id in self._edges:
                self._settle(job.id, to, now)
        elif job.status is Status.FAILED and job.id in self._steps:
            self._workflows[self._steps[job.id].workflow_id].open_steps += 1
            if job.id in self._edges:
                self._unblock(job.id, now)
        return new

    def _step_ended(self, job_id: UUID, ending: Status) -> None:
        """One step fewer open in its workflow; the last one says how it ended."""
        workflow = self._workflows[self._steps[job_id].workflow_id]
        workflow.open_steps -= 1
        if workflow.open_steps == 0:
            statuses = [j.status for i, step in self._steps.items()
                        if step.workflow_id == workflow.id and (j := self._jobs.get(i)) is not None]
            became = ended_as([*statuses, ending], cancelled=workflow.cancelled_at is not None)
            self._changes.setdefault(job_id, []).append(WorkflowChange(workflow.id, workflow.name, became))

    def _settle(self, parent: UUID, ending: Status, now: datetime) -> None:
        """The edges out of a job that just ended, resolved as every store
        resolves them (core/workflow.py): the ending that leaves a child no
        parent to wait on releases it, one its edge refuses blocks it."""
        blocked = 0
        for child, edge in self._edges[parent].items():
            if edge[1] != EdgeState.PENDING:
                continue
            edge[1] = edge_state(edge[0], ending)
            step = self._steps[child]
            step.waiting -= 1
            step.blocking += edge[1] == EdgeState.BLOCKING
            blocked += self._step_moved(child, now) is Status.BLOCKED
        if blocked:
            workflow = self._workflows[self._steps[parent].workflow_id]
            self._changes.setdefault(parent, []).append(WorkflowChange(workflow.id, workflow.name, "blocked", blocked))

    def _unblock(self, parent: UUID, now: datetime) -> None:
        """A failed parent revived: the edges it blocked wait on it again."""
        for child, edge in self._edges[parent].items():
            if edge[1] == EdgeState.BLOCKING:
                edge[1] = EdgeState.PENDING
                step = self._steps[child]
                step.waiting += 1
                step.blocking -= 1
                self._step_moved(child, now)

    def _tell_woken(self) -> None:
        """Wake-ups for the steps released under the lock, told after it."""
        with self._lock:
            queues, self._woken = self._woken, set()
            listeners = list(self._listeners)
        for queue in queues:
            for on_wake in listeners:
                on_wake(queue)

    def _step_moved(self, child: UUID, now: datetime) -> Status | None:
        """The step's status from its counts, if that moved it (None if not)."""
        job, step = self._jobs.get(child), self._steps[child]
        if job is None or job.status not in (Status.PENDING, Status.BLOCKED):
            return None
        to = step_status(step.waiting, step.blocking)
        if to is job.status:
            return None
        self._move(job, to, now, run_at=now if to is Status.QUEUED else job.run_at)
        if to is Status.QUEUED:
            self._woken.add(job.queue)
        return to

    def _event(self, job: Job, before: Status | None, meta: dict, now: datetime) -> None:
        self._events.append(
            JobEvent(
                id=len(self._events) + 1,
                job_id=job.id,
                at=now,
                from_status=before,
                to_status=job.status,
                attempt=job.attempts,
                meta=dict(meta),
            )
        )

    def job_get(self, *, job_id: UUID) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def job_events_list(self, *, job_id: UUID, newest: int | None = None) -> list[JobEvent]:
        with self._lock:
            found = [e for e in self._events if e.job_id == job_id]
        return found if newest is None else found[-newest:] if newest > 0 else []

    def finishes_subscribe(self, *, job_id: UUID, on_finish: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            self._finish_listeners.setdefault(job_id, []).append(on_finish)

        def stop() -> None:
            with self._lock:
                self._finish_listeners[job_id].remove(on_finish)

        return stop

    def wakeups_subscribe(self, on_wake: Callable[[str], None]) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(on_wake)
        return lambda: self._listeners.remove(on_wake)

    def close(self) -> None:
        pass

    def _held(self, lease: Lease) -> Job | None:
        job = self._jobs.get(lease.job_id)
        if job and job.status is Status.RUNNING and job.lease_token == lease.token:
            return job
        return None

    def _live(self, lease: Lease) -> Job | None:
        """The job while ``lease`` holds it and has not expired: a holder past
        its lease writes nothing, even before the reclaim takes the job."""
        job = self._held(lease)
        return job if job and job.lease_expires_at is not None and job.lease_expires_at > self._clock() else None
