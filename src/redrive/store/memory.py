"""The in-memory reference store: the semantics of the Store protocol in plain
Python, for redrive's own suite and for users' tests. Single process only."""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Sequence
from uuid import UUID

from redrive.core.job import Completion, FailNow, Job, JobEvent, Lease, NewJob, RetryLater
from redrive.core.states import Status, check_transition
from redrive.errors import ConfigError, JobNotFound
from redrive.store.port import LEASE_EXPIRED, LEASE_EXPIRED_MESSAGE


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class MemoryStore:
    dialect = "memory"

    def __init__(self, *, clock: Callable[[], datetime] = _utcnow) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._jobs: dict[UUID, Job] = {}
        self._events: list[JobEvent] = []
        self._listeners: list[Callable[[str], None]] = []

    def migrate(self) -> list[int]:
        return []

    def now(self) -> datetime:
        return self._clock()

    # -- writing -------------------------------------------------------------

    def _move(
        self, job: Job, to: Status, now: datetime, *, meta: dict | None = None, **changes: Any
    ) -> Job:
        check_transition(job.status, to)
        new = replace(job, status=to, updated_at=now, **changes)
        self._jobs[job.id] = new
        self._event(new, job.status, meta or {}, now)
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

    def jobs_insert(self, *, jobs: Sequence[NewJob], conn: Any = None) -> list[Job]:
        if conn is not None:
            raise ConfigError("the memory store has no transactions to join")
        created = []
        with self._lock:
            now = self._clock()
            for new in jobs:
                run_at = new.run_at or now + (new.delay or timedelta(0))
                job = Job(
                    id=new.id,
                    task=new.task,
                    queue=new.queue,
                    args=list(new.args),
                    kwargs=dict(new.kwargs),
                    status=Status.SCHEDULED if run_at > now else Status.QUEUED,
                    priority=new.priority,
                    run_at=run_at,
                    attempts=0,
                    max_attempts=new.max_attempts,
                    owner=new.owner,
                    lease_token=None,
                    lease_owner=None,
                    lease_expires_at=None,
                    last_error_code=None,
                    last_error_message=None,
                    error_code=None,
                    error_message=None,
                    result=None,
                    created_at=now,
                    updated_at=now,
                    started_at=None,
                    finished_at=None,
                    failed_at=None,
                )
                if job.id in self._jobs:
                    raise ConfigError(f"a job with id {job.id} already exists")
                self._jobs[job.id] = job
                self._event(job, None, {}, now)
                created.append(job)
            listeners = list(self._listeners)
        for queue in {j.queue for j in created}:
            for on_wake in listeners:
                on_wake(queue)
        return created

    def jobs_claim(
        self, *, queues: Sequence[str], limit: int, worker_id: str, lease_ttl: timedelta
    ) -> list[Job]:
        with self._lock:
            now = self._clock()
            due = sorted(
                (
                    j
                    for j in self._jobs.values()
                    if j.status in (Status.SCHEDULED, Status.QUEUED)
                    and j.queue in queues
                    and j.run_at <= now
                ),
                key=lambda j: (j.priority, j.run_at),
            )[:limit]
            return [
                self._move(
                    j,
                    Status.RUNNING,
                    now,
                    attempts=j.attempts + 1,
                    lease_token=uuid.uuid4(),
                    lease_owner=worker_id,
                    lease_expires_at=now + lease_ttl,
                    started_at=j.started_at or now,
                    meta={"worker": worker_id},
                )
                for j in due
            ]

    def _held(self, lease: Lease) -> Job | None:
        job = self._jobs.get(lease.job_id)
        if job and job.status is Status.RUNNING and job.lease_token == lease.token:
            return job
        return None

    def leases_extend(self, *, leases: Sequence[Lease], lease_ttl: timedelta) -> set[UUID]:
        with self._lock:
            now = self._clock()
            held = set()
            for lease in leases:
                if job := self._held(lease):
                    self._jobs[job.id] = replace(job, lease_expires_at=now + lease_ttl)
                    held.add(job.id)
            return held

    def _fenced(self, items: Sequence[Any], apply: Callable[[Job, Any, datetime], None]) -> set[UUID]:
        with self._lock:
            now = self._clock()
            applied = set()
            for item in items:
                lease = item if isinstance(item, Lease) else item.lease
                if job := self._held(lease):
                    apply(job, item, now)
                    applied.add(job.id)
            return applied

    _NO_LEASE = {"lease_token": None, "lease_owner": None, "lease_expires_at": None}

    def jobs_complete(self, *, items: Sequence[Completion]) -> set[UUID]:
        def apply(job: Job, item: Completion, now: datetime) -> None:
            self._move(job, Status.SUCCEEDED, now, result=item.result, finished_at=now,
                       meta=dict(item.meta), **self._NO_LEASE)

        return self._fenced(items, apply)

    def jobs_retry(self, *, items: Sequence[RetryLater]) -> set[UUID]:
        def apply(job: Job, item: RetryLater, now: datetime) -> None:
            self._move(
                job, Status.QUEUED, now,
                run_at=now + item.delay,
                last_error_code=item.error_code,
                last_error_message=item.error_message,
                meta={"error_code": item.error_code,
                      "delay_ms": round(item.delay.total_seconds() * 1000), **item.meta},
                **self._NO_LEASE,
            )

        return self._fenced(items, apply)

    def jobs_fail(self, *, items: Sequence[FailNow]) -> set[UUID]:
        def apply(job: Job, item: FailNow, now: datetime) -> None:
            self._fail(job, item.error_code, item.error_message, now, dict(item.meta))

        return self._fenced(items, apply)

    def _fail(self, job: Job, code: str, message: str, now: datetime, meta: dict) -> None:
        self._move(
            job, Status.FAILED, now,
            error_code=code, error_message=message,
            last_error_code=code, last_error_message=message,
            finished_at=now, failed_at=now,
            meta={"error_code": code, **meta},
            **self._NO_LEASE,
        )

    def jobs_requeue(self, *, leases: Sequence[Lease]) -> set[UUID]:
        def apply(job: Job, _: Lease, now: datetime) -> None:
            self._move(job, Status.QUEUED, now, run_at=now, attempts=job.attempts - 1,
                       meta={"reason": "shutdown"}, **self._NO_LEASE)

        return self._fenced(leases, apply)

    def jobs_reclaim(self, *, limit: int = 500) -> list[UUID]:
        with self._lock:
            now = self._clock()
            expired = [
                j for j in self._jobs.values()
                if j.status is Status.RUNNING and j.lease_expires_at <= now
            ][:limit]
            for job in expired:
                meta = {"reason": "lease_expired", "worker": job.lease_owner}
                if job.attempts >= job.max_attempts:
                    self._fail(job, LEASE_EXPIRED, LEASE_EXPIRED_MESSAGE, now, meta)
                else:
                    self._move(job, Status.QUEUED, now, run_at=now, meta=meta, **self._NO_LEASE)
            return [j.id for j in expired]

    def job_cancel(self, *, job_id: UUID) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise JobNotFound(f"no job has id {job_id}")
            now = self._clock()
            return self._move(job, Status.CANCELLED, now, finished_at=now)

    # -- reading -------------------------------------------------------------

    def job_get(self, *, job_id: UUID) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def jobs_list(
        self,
        *,
        statuses: Sequence[Status] | None = None,
        queue: str | None = None,
        task: str | None = None,
        limit: int = 100,
    ) -> list[Job]:
        with self._lock:
            found = [
                j for j in self._jobs.values()
                if (statuses is None or j.status in statuses)
                and (queue is None or j.queue == queue)
                and (task is None or j.task == task)
            ]
        found.sort(key=lambda j: (j.created_at, str(j.id)), reverse=True)
        return found[:limit]

    def jobs_count(self) -> dict[Status, int]:
        counts = dict.fromkeys(Status, 0)
        with self._lock:
            for job in self._jobs.values():
                counts[job.status] += 1
        return counts

    def job_events_list(self, *, job_id: UUID) -> list[JobEvent]:
        with self._lock:
            return [e for e in self._events if e.job_id == job_id]

    def wakeups_subscribe(self, on_wake: Callable[[str], None]) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(on_wake)
        return lambda: self._listeners.remove(on_wake)

    def close(self) -> None:
        pass

