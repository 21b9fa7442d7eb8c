"""The memory store's state: its jobs, events, dead letters and the rest in
dicts under one lock, its clock, a job moved from one status to another
with its event, and reading one job."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, ClassVar
from uuid import UUID

from redrive.core.breaker import Breaker
from redrive.core.job import DeadLetter, Job, JobEvent, Lease
from redrive.core.outbox import OutboxRow
from redrive.core.states import TERMINAL, Status, check_transition
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
        self._rollups: dict[tuple[int, str, str, str, int], int] = {}  # (at, queue, task, kind, bucket): n

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
        return new

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

    def job_events_list(self, *, job_id: UUID) -> list[JobEvent]:
        with self._lock:
            return [e for e in self._events if e.job_id == job_id]

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
