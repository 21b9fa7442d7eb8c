"""The in-memory reference store: the semantics of the Store protocol in plain
Python, for redrive's own suite and for users' tests. Single process only."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar
from uuid import UUID

from redrive.core.breaker import Breaker
from redrive.core.dead_letters import Revival, cancel_meta, distinct_jobs, escalates, fail_meta, retry_meta
from redrive.core.job import (
    DeadLetter,
    DeadLetterFilter,
    EnqueueResult,
    Job,
    JobEvent,
    Lease,
    NewJob,
    StageDone,
    refuse_reuse,
    takes_over,
)
from redrive.core.limits import Candidate, Limits, Permit, keys_of, pick, usage_of
from redrive.core.outbox import OutboxChange, OutboxRow, OutboxStatus
from redrive.core.rollups import UNTIMED, WAIT, rollup_folds, rollup_range, rollup_tally
from redrive.core.states import ACTIVE, ACTIVE_ORDER, TERMINAL, Status, check_transition
from redrive.core.transitions import (
    Cancellation,
    Completion,
    FailNow,
    Finish,
    Finished,
    Requeue,
    RetryLater,
    taken_back,
)
from redrive.errors import ConfigError, DeadLetterNotFound
from redrive.store.port import WORKER_FORGOTTEN_AFTER_S, BreakerEvent, Control, WorkerReport, worker_detail
from redrive.store.reads import (
    AuditEntry,
    DeadLetterFacets,
    JobFilter,
    Page,
    QueueStats,
    Rollup,
    RunEnded,
    ScheduleState,
    WorkerInfo,
    decode_cursor,
    encode_cursor,
    page_size,
    paged,
)


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


class MemoryStore:
    dialect = "memory"

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

    # -- writing -------------------------------------------------------------

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

    def jobs_insert(self, *, jobs: Iterable[NewJob], conn: Any = None) -> list[EnqueueResult]:
        if conn is not None:
            raise ConfigError("the memory store has no transactions to join")
        jobs = list(jobs)  # checked in full before anything is written
        results = []
        metas: dict[UUID, dict[str, Any]] = {}
        with self._lock:
            keys = dict(self._keys)  # written back only if every job is accepted
            now = self._clock()
            for new in jobs:
                if new.key is not None:
                    name = (new.task, new.owner or "", new.key.key)
                    if name in keys:
                        version, job_id, fingerprint = keys[name]
                        twin = self._jobs[job_id]
                        if not takes_over(new.key, version, twin.status):
                            refuse_reuse(new.key, version, fingerprint)
                            results.append(EnqueueResult(twin, duplicate=True))
                            continue
                    keys[name] = (new.key.version, new.id, new.key.fingerprint)
                run_at = new.run_at or now + (new.delay or timedelta(0))
                # copies: a caller changing its arguments later must not change the stored job
                job = replace(new, args=list(new.args), kwargs=dict(new.kwargs)).created(
                    status=Status.SCHEDULED if run_at > now else Status.QUEUED, run_at=run_at, at=now)
                if job.id in self._jobs:
                    raise ConfigError(f"a job with id {job.id} already exists")
                results.append(EnqueueResult(job))
                metas[job.id] = new.created_meta
            for result in results:
                if not result.duplicate:
                    self._jobs[result.job.id] = result.job
                    self._event(result.job, None, metas[result.job.id], now)
            self._keys = keys
            listeners = list(self._listeners)
        for queue in {r.job.queue for r in results if not r.duplicate}:
            for on_wake in listeners:
                on_wake(queue)
        return results

    def jobs_claim(
        self, *, queues: Sequence[str], limit: int, worker_id: str, lease_ttl: timedelta,
        blocked: Sequence[str] = (), limits: Limits | None = None,
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
                    and not set(j.dependencies) & set(blocked)
                ),
                key=lambda j: (j.priority, j.run_at),
            )
            if limits:
                due = self._within(due, limits, limit, now)
            claimed = [
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
                for j in due[:limit]
            ]
            if limits:
                for job in claimed:
                    candidate = Candidate(str(job.id), job.queue, job.owner, job.dependencies)
                    self._permits += [(key, job.id, job.lease.token, now) for key, _ in keys_of(candidate, limits)]
            return claimed

    def _within(self, due: list[Job], limits: Limits, limit: int, now: datetime) -> list[Job]:
        # Only the keys this claim reads, whose rules it holds: another
        # queue's window may be longer than any of this claim's rules keep.
        keep, read = limits.longest, {key for j in due for key, _ in keys_of(
            Candidate(str(j.id), j.queue, j.owner, j.dependencies), limits)}
        self._permits = [p for p in self._permits
                         if p[0] not in read or now - p[3] < keep or self._held(Lease(p[1], p[2]))]
        usage = usage_of((Permit(key, (now - at).total_seconds(), self._held(Lease(job_id, token)) is not None)
                          for key, job_id, token, at in self._permits), limits)
        by_id = {str(j.id): j for j in due}
        chosen = pick([Candidate(str(j.id), j.queue, j.owner, j.dependencies) for j in due], usage, limits, limit)
        return [by_id[c.id] for c in chosen]

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

    def leases_extend(self, *, leases: Sequence[Lease], lease_ttl: timedelta) -> set[Lease]:
        with self._lock:
            now = self._clock()
            held = set()
            for lease in leases:
                if job := self._live(lease):
                    self._jobs[job.id] = replace(job, lease_expires_at=now + lease_ttl)
                    held.add(lease)
            return held

    def lease_check(self, *, lease: Lease, conn: Any = None) -> bool:
        with self._lock:
            return self._live(lease) is not None

    _NO_LEASE: ClassVar[Mapping[str, None]] = {"lease_token": None, "lease_owner": None, "lease_expires_at": None}

    def jobs_finish(self, items: Sequence[Finish]) -> list[Finished]:
        with self._lock:
            now = self._clock()
            written = []
            for item in items:
                if job := self._live(item.lease):
                    written.append(self._finish(job, item, now))
            return self._rolled(written, now)

    def _rolled(self, written: list[Finished], now: datetime) -> list[Finished]:
        minute = int(now.timestamp()) // 60 * 60
        for (queue, task, kind, bucket), n in rollup_tally(written).items():
            key = (minute, queue, task, kind, bucket)
            self._rollups[key] = self._rollups.get(key, 0) + n
        return written

    def _finish(self, job: Job, item: Finish, now: datetime) -> Finished:
        match item:
            case Completion():
                self._move(job, Status.SUCCEEDED, now, result=item.result, finished_at=now,
                           meta=dict(item.meta), **self._NO_LEASE)
            case RetryLater():
                stage = item.stage or job.stage
                failed = dict(last_error_code=item.error_code, last_error_message=item.error_message, stage=stage,
                              stage_attempts=_counts(item.stage_attempts, job),
                              first_failed_at=job.first_failed_at or now, **self._NO_LEASE)
                if (asked := self._cancel_requests.pop(job.id, None)) is not None:
                    self._move(job, Status.CANCELLED, now, finished_at=now, **failed, meta=cancel_meta(
                        by=asked, error_code=item.error_code, stage=stage, extra=item.meta))
                    return Finished(item, job.task, job.queue, Status.CANCELLED, job.attempts, stage,
                                    cancelled_by=asked)
                self._move(job, Status.QUEUED, now, run_at=now + item.delay, **failed,
                           meta=retry_meta(error_code=item.error_code, delay=item.delay, stage=stage, extra=item.meta))
            case FailNow():
                letter = self._fail(job, item, now)
                return Finished(item, job.task, job.queue, Status.FAILED, job.attempts, letter.stage,
                                dead_letter_id=letter.id, escalated=letter.escalated)
            case Cancellation():
                self._cancel_requests.pop(job.id, None)
                self._move(job, Status.CANCELLED, now, finished_at=now, meta={"by": item.by, **item.meta},
                           **self._NO_LEASE)
                return Finished(item, job.task, job.queue, Status.CANCELLED, job.attempts, job.stage,
                                cancelled_by=item.by)
            case Requeue():
                self._move(job, Status.QUEUED, now, run_at=now + item.delay, attempts=job.attempts - item.refund,
                           meta=dict(item.meta), **self._NO_LEASE)
        after = self._jobs[job.id]
        return Finished(item, job.task, job.queue, after.status, job.attempts, after.stage)

    def _cancel_now(self, job: Job, by: str, now: datetime) -> Job:
        return self._move(job, Status.CANCELLED, now, finished_at=now, meta={"by": by})

    def _fail(self, job: Job, item: FailNow, now: datetime) -> DeadLetter:
        error_class = item.error_class or item.error_code
        stage = item.stage or job.stage
        counts = _counts(item.stage_attempts, job)
        first = job.first_failed_at or now
        previous = max((d for d in self._letters.values() if d.job_id == job.id),
                       key=lambda d: d.id, default=None)
        letter = DeadLetter(
            id=len(self._letters) + 1, job_id=job.id, task=job.task, queue=job.queue,
            owner=job.owner, error_class=error_class, error_code=item.error_code,
            error_message=item.error_message, retryable=item.retryable, stage=stage,
            stage_attempts=counts, attempts=job.attempts, last_stack=item.stack,
            context=dict(item.context), first_failure_at=first, last_failure_at=now,
            escalated=escalates(previous_error_class=previous.error_class if previous else None,
                                previous_replayed=bool(previous and previous.replayed_at),
                                error_class=error_class, retryable=item.retryable),
            previous_id=previous.id if previous else None,
            replayed_at=None, replayed_by=None, replay_from=None, notes=[], resolved_at=None, resolved_by=None,
        )
        self._letters[letter.id] = letter
        self._move(
            job, Status.FAILED, now,
            error_code=item.error_code, error_message=item.error_message,
            last_error_code=item.error_code, last_error_message=item.error_message,
            finished_at=now, failed_at=now, stage=stage, stage_attempts=counts,
            first_failed_at=first,
            meta=fail_meta(error_code=item.error_code, error_class=error_class, stage=stage,
                           dead_letter_id=letter.id, escalated=letter.escalated, extra=item.meta),
            **self._NO_LEASE,
        )
        return letter

    def stages_save(self, *, items: Sequence[StageDone]) -> set[Lease]:
        with self._lock:
            now = self._clock()
            saved = set()
            for item in items:
                if job := self._live(item.lease):
                    self._jobs[job.id] = replace(
                        job, checkpoint={**job.checkpoint, item.stage: item.output},
                        stage_attempts=dict(item.stage_attempts), stage=item.next_stage or item.stage,
                        updated_at=now,
                    )
                    saved.add(item.lease)
            return saved

    def outbox_open(self, *, lease: Lease, key: str, token: str) -> OutboxRow | None:
        with self._lock:
            if not self._live(lease):
                return None
            if key not in self._outbox:
                now = self._clock()
                self._outbox[key] = OutboxRow(
                    key=key, token=token, status=OutboxStatus.PENDING, provider_id=None,
                    notified_at=None, job_id=lease.job_id, sends=0, reconciliations=0,
                    error_code=None, error_message=None, created_at=now, updated_at=now)
            return self._outbox[key]

    def outbox_update(self, *, lease: Lease, key: str, change: OutboxChange) -> OutboxRow | None:
        with self._lock:
            row = self._outbox.get(key)
            if row is None or not self._live(lease):
                return None
            now = self._clock()
            provider_id = row.provider_id if change.provider_id is None else (change.provider_id or None)
            notified_at = row.notified_at if change.notified is None else (now if change.notified else None)
            self._outbox[key] = replace(
                row, status=change.status, provider_id=provider_id, notified_at=notified_at,
                error_code=change.error_code, error_message=change.error_message,
                sends=row.sends + change.send_started,
                reconciliations=row.reconciliations + change.reconciled,
                job_id=lease.job_id, updated_at=now)
            return self._outbox[key]

    def schedule_checkpoint(self, *, name: str, now: datetime) -> datetime:
        with self._lock:
            if name not in self._schedules:
                self._schedule_updated[name] = self._clock()
            return self._schedules.setdefault(name, now)

    def schedule_pause(self, *, name: str, by: str, now: datetime) -> bool:
        with self._lock:
            if self._schedule_paused.get(name) is not None:
                return False
            self._schedules.setdefault(name, now)
            self._schedule_paused[name] = by
            self._schedule_updated[name] = self._clock()
            return True

    def schedule_resume(self, *, name: str) -> bool:
        with self._lock:
            if self._schedule_paused.pop(name, None) is None:
                return False
            self._schedule_updated[name] = self._clock()
            return True

    def schedule_advance(self, *, name: str, to: datetime) -> None:
        with self._lock:
            self._schedules[name] = max(self._schedules.get(name, to), to)
            self._schedule_updated[name] = self._clock()

    def jobs_reclaim(self, *, limit: int = 500, worker_id: str | None = None,
                     bystanders: bool = False) -> list[Finished]:
        with self._lock:
            now = self._clock()
            taken = [
                j for j in self._jobs.values()
                if j.status is Status.RUNNING and (j.lease_owner == worker_id if worker_id is not None else
                                                   j.lease_expires_at is not None and j.lease_expires_at <= now)
            ][:limit]
            return self._rolled([self._finish(job, taken_back(
                job.lease, job.lease_owner, last=job.attempts >= job.max_attempts, crashed=worker_id is not None,
                bystander=bystanders), now) for job in taken], now)

    def jobs_prune(self, *, older_than: timedelta, limit: int = 10_000) -> int:
        with self._lock:
            before = self._clock() - older_than
            held = {d.job_id for d in self._letters.values() if d.state == "open"}
            finished = [(j.finished_at, j) for j in self._jobs.values()
                        if j.status in TERMINAL and j.finished_at is not None and j.id not in held]
            doomed = [j for at, j in sorted(finished, key=lambda pair: pair[0]) if at < before][:limit]
            return len(self._forget({j.id for j in doomed}))

    def jobs_delete(self, *, job_ids: Sequence[UUID]) -> list[UUID]:
        with self._lock:
            gone = {i for i in job_ids if i in self._jobs and self._jobs[i].status in TERMINAL}
            self._forget(gone)
        return [i for i in dict.fromkeys(job_ids) if i in gone]

    def _forget(self, gone: set[UUID]) -> set[UUID]:
        """Finished jobs gone, with their events, letters, keys and requests (the lock held)."""
        for job_id in gone:
            del self._jobs[job_id]
        self._events = [e for e in self._events if e.job_id not in gone]
        self._letters = {i: d for i, d in self._letters.items() if d.job_id not in gone}
        self._keys = {name: key for name, key in self._keys.items() if key[1] not in gone}
        for job_id in gone:
            self._cancel_requests.pop(job_id, None)
        return gone

    def jobs_cancel(self, *, job_ids: Sequence[UUID], by: str) -> list[Job | None]:
        with self._lock:
            now = self._clock()
            return [self._cancel_one(job_id, by, now) for job_id in job_ids]

    def _cancel_one(self, job_id: UUID, by: str, now: datetime) -> Job | None:
        job = self._jobs.get(job_id)
        if job is None or job.status in TERMINAL:
            return None
        if job.status is Status.RUNNING:
            self._cancel_requests.setdefault(job_id, by)
            return job
        return self._cancel_now(job, by, now)

    def control_read(self, *, job_ids: Sequence[UUID]) -> Control:
        with self._lock:
            asked = {job_id: self._cancel_requests[job_id] for job_id in job_ids if job_id in self._cancel_requests}
            return Control(paused=dict(self._paused), cancels=asked)

    def queue_pause(self, *, queue: str, by: str) -> bool:
        with self._lock:
            if queue in self._paused:
                return False
            self._paused[queue] = by
            return True

    def worker_report(self, *, report: WorkerReport) -> None:
        now = self._clock()
        with self._lock:
            for gone in [w.id for w in self._workers.values() if w.id != report.id
                         and (now - w.heartbeat_at).total_seconds() > WORKER_FORGOTTEN_AFTER_S]:
                del self._workers[gone]
            known = self._workers.get(report.id)
            self._workers[report.id] = WorkerInfo.of(
                {**asdict(report), "detail": worker_detail(report)}, queues=list(report.queues),
                started_at=known.started_at if known else now, heartbeat_at=now)

    def worker_remove(self, *, worker_id: str) -> None:
        with self._lock:
            self._workers.pop(worker_id, None)

    def queue_resume(self, *, queue: str) -> bool:
        with self._lock:
            return self._paused.pop(queue, None) is not None

    def jobs_revive(self, *, revivals: Sequence[Revival]) -> list[Job | None]:
        distinct_jobs(revivals)
        with self._lock:  # one transaction: nothing else sees half the batch
            revived = [self._revive(r) for r in revivals]
            listeners = list(self._listeners)
        for queue in {job.queue for job in revived if job is not None}:
            for on_wake in listeners:
                on_wake(queue)
        return revived

    def _revive(self, revival: Revival) -> Job | None:
        job_id, plan, dead_letter_id = revival.job_id, revival.plan, revival.dead_letter_id
        job = self._jobs.get(job_id)
        if job is None or job.status is not Status.FAILED or job.failed_at != plan.failed_at:
            return None
        letter = self._letters.get(dead_letter_id) if dead_letter_id is not None else None
        if dead_letter_id is not None and (letter is None or letter.job_id != job_id or letter.state != "open"):
            return None
        now = self._clock()
        self._cancel_requests.pop(job_id, None)
        marked = []
        for d in list(self._letters.values()):
            if d.job_id == job_id and d.state == "open":
                self._letters[d.id] = replace(d, replayed_at=now, replayed_by=plan.by, replay_from=plan.replay_from)
                marked.append(d.id)
        # The event records attempt 0: the revived job starts a fresh count.
        return self._move(
            job, Status.QUEUED, now, run_at=now, attempts=0, error_code=None,
            error_message=None, finished_at=None, failed_at=None, first_failed_at=None,
            stage=plan.stage, checkpoint=dict(job.checkpoint) if plan.keep_checkpoint else {},
            stage_attempts=dict(plan.stage_attempts), manual_retry_count=plan.manual_retries,
            meta=plan.meta(marked),
        )

    def breaker_update(
        self, *, name: str, change: Callable[[Breaker, float], Breaker], by: str | None = None
    ) -> Breaker:
        with self._lock:
            now = self._clock()
            before = replace(self._breakers.get(name, Breaker()), changes=())
            after = change(before, now.timestamp())
            self._breakers[name] = after
            for from_state, to_state, reason in after.changes:
                self._breaker_events.append(BreakerEvent(name, now, from_state.value, to_state.value,
                                                         reason, by))
            return after

    def breakers_list(self) -> tuple[dict[str, Breaker], float]:
        with self._lock:
            return {n: replace(b, changes=()) for n, b in sorted(self._breakers.items())}, \
                self._clock().timestamp()

    def breaker_events_list(self, *, name: str) -> list[BreakerEvent]:
        with self._lock:
            return [e for e in self._breaker_events if e.name == name]

    def dead_letter_get(self, *, id: int) -> DeadLetter | None:
        with self._lock:
            return self._letters.get(id)

    def _letters_matching(self, where: DeadLetterFilter) -> list[DeadLetter]:
        """Newest first."""
        now = self._clock()
        with self._lock:
            found = [
                d for d in self._letters.values()
                if (where.error_class is None or d.error_class == where.error_class)
                and (where.stage is None or d.stage == where.stage)
                and (where.task is None or d.task == where.task)
                and (where.owner is None or d.owner == where.owner)
                and (where.job_id is None or d.job_id == where.job_id)
                and (where.state is None or (where.state == "escalated" and d.escalated and d.state == "open")
                     or where.state == d.state)
                and (where.older_than is None or d.last_failure_at <= now - where.older_than)
                and (where.newer_than is None or d.last_failure_at > now - where.newer_than)
            ]
        return sorted(found, key=lambda d: -d.id)

    def dead_letter_note(self, *, id: int, text: str, by: str | None) -> DeadLetter:
        with self._lock:
            letter = self._letters.get(id)
            if letter is None:
                raise DeadLetterNotFound(f"no dead letter has id {id}")
            note = {"at": self._clock().isoformat(), "by": by, "text": text}
            self._letters[id] = replace(letter, notes=[*letter.notes, note])
            return self._letters[id]

    def dead_letters_resolve(self, *, ids: Sequence[int], by: str | None, note: str | None = None) -> list[DeadLetter]:
        with self._lock:
            now = self._clock()
            done = []
            for letter in (self._letters.get(i) for i in dict.fromkeys(ids)):
                if letter is not None and letter.state == "open":
                    notes = [*letter.notes, {"at": now.isoformat(), "by": by, "text": note}] if note else letter.notes
                    self._letters[letter.id] = replace(letter, resolved_at=now, resolved_by=by, notes=notes)
                    done.append(self._letters[letter.id])
            return done

    # -- the read side (store/reads.py) ---------------------------------------

    def jobs_page(self, *, where: JobFilter, after: str | None = None, limit: int = 50) -> Page[Job]:
        size, bound = page_size(limit), _time_key(decode_cursor(after, 2))
        with self._lock:
            found = sorted(((j.created_at, str(j.id)), j) for j in self._jobs.values() if where.matches(j))
        rows = [j for key, j in reversed(found) if bound is None or key < bound]
        return paged(rows[: size + 1], size, lambda j: encode_cursor(j.created_at.isoformat(), str(j.id)))

    def queues_stats(self, *, exact_up_to: int | None = None) -> list[QueueStats]:
        now = self._clock()
        stats: dict[str, QueueStats] = {}
        with self._lock:
            for job in self._jobs.values():
                if job.status not in ACTIVE:
                    continue
                queue = stats.setdefault(job.queue, QueueStats(job.queue, dict.fromkeys(ACTIVE_ORDER, 0)))
                queue.counts[job.status] += 1
                if job.status is not Status.RUNNING and job.run_at <= now:
                    age = (now - job.run_at).total_seconds()
                    if queue.oldest_due_age_s is None or age > queue.oldest_due_age_s:
                        stats[job.queue] = replace(queue, oldest_due_age_s=age)
                elif job.status is Status.RUNNING and job.started_at is not None:
                    ran = (now - job.started_at).total_seconds()
                    if queue.oldest_running_age_s is None or ran > queue.oldest_running_age_s:
                        stats[job.queue] = replace(queue, oldest_running_age_s=ran)
        return [stats[name] for name in sorted(stats)]

    def runs_ended(self, *, since: datetime, limit: int = 10_000) -> list[RunEnded]:
        with self._lock:
            last = {event.job_id: event for event in self._events}  # oldest first: the last one stays
            ended = [job for job in self._jobs.values() if job.status in (Status.SUCCEEDED, Status.FAILED)
                     and job.finished_at is not None and job.finished_at >= since]
            ended.sort(key=lambda job: job.finished_at or since, reverse=True)
            runs = []
            for job in ended[:limit]:
                took = last[job.id].meta.get("duration_ms") if job.id in last else None
                runs.append(RunEnded(job.finished_at or since, job.task, job.status is Status.FAILED,
                                     None if took is None else took / 1000))
            return runs

    def alerts_firing(self) -> dict[str, str]:
        with self._lock:
            return dict(self._alerts)

    def alert_fire(self, *, rule: str, incident: str, detail: str) -> bool:
        with self._lock:
            if rule in self._alerts:
                return False
            self._alerts[rule] = incident
            return True

    def alert_resolve(self, *, rule: str, incident: str) -> bool:
        with self._lock:
            if self._alerts.get(rule) != incident:
                return False
            del self._alerts[rule]
            return True

    def rollups_read(self, *, since: datetime, slot: timedelta = timedelta(minutes=1), by: str = "queue",
                     timed: bool = True) -> list[Rollup]:
        where = rollup_range(since, slot, by, timed)
        grain = where["grain_s"]
        added: Counter[tuple[int, str, str, int]] = Counter()
        with self._lock:
            for (at, queue, task, kind, bucket), n in self._rollups.items():
                if at >= where["since"] and (timed or kind != WAIT):
                    added[(at // grain * grain, task if by == "task" else queue, kind, bucket if timed else UNTIMED)] += n
        return [Rollup(datetime.fromtimestamp(at, UTC), key, kind, bucket, n)
                for (at, key, kind, bucket), n in sorted(added.items())]

    def rollups_compact(self) -> int:
        changed = 0
        with self._lock:
            for name, before, grain_s in rollup_folds(self._clock()):
                folding = name == "rollups_fold"  # one writer, no shards: only the grain changes
                for key in [k for k in self._rollups if k[0] < before and not (folding and k[0] % grain_s == 0)]:
                    n = self._rollups.pop(key)
                    changed += 1
                    if folding:
                        folded = (key[0] // grain_s * grain_s, *key[1:])
                        self._rollups[folded] = self._rollups.get(folded, 0) + n
        return changed

    def dead_letters_page(
        self, *, where: DeadLetterFilter, after: str | None = None, limit: int = 50,
    ) -> Page[DeadLetter]:
        size, key = page_size(limit), decode_cursor(after, 1)
        rows = [d for d in self._letters_matching(where) if key is None or d.id < _int(key[0])]
        return paged(rows[: size + 1], size, lambda d: encode_cursor(d.id))

    def dead_letter_facets(self, *, where: DeadLetterFilter) -> DeadLetterFacets:
        found = Counter((d.task, d.error_class, d.stage or "") for d in self._letters_matching(where))
        return DeadLetterFacets.of({"task": task, "error_class": error_class, "stage": stage, "n": n}
                                   for (task, error_class, stage), n in found.items())

    def outbox_page(
        self, *, status: OutboxStatus | None = None, job_id: UUID | None = None, after: str | None = None,
        limit: int = 50,
    ) -> Page[OutboxRow]:
        size, bound = page_size(limit), _time_key(decode_cursor(after, 2))
        with self._lock:
            found = sorted(((r.created_at, r.key), r) for r in self._outbox.values()
                           if (status is None or r.status == status) and (job_id is None or r.job_id == job_id))
        rows = [r for key, r in found if bound is None or key > bound]
        return paged(rows[: size + 1], size, lambda r: encode_cursor(r.created_at.isoformat(), r.key))

    def audit_record(self, *, by: str, action: str, job_id: UUID | None = None,
                     detail: dict[str, Any] | None = None) -> AuditEntry:
        with self._lock:
            entry = AuditEntry(len(self._audit) + 1, self._clock(), by, action, job_id, dict(detail or {}))
            self._audit.append(entry)
            return entry

    def session_open(self, *, id: str, principal: str, ttl: timedelta) -> None:
        now = self._clock()
        with self._lock:
            self._sessions = {k: v for k, v in self._sessions.items() if v[1] >= now}
            self._sessions[id] = (principal, now + ttl)

    def session_read(self, *, id: str) -> str | None:
        with self._lock:
            found = self._sessions.get(id)
        return found[0] if found is not None and found[1] > self._clock() else None

    def session_close(self, *, id: str) -> None:
        with self._lock:
            self._sessions.pop(id, None)

    def audits_list(self, *, job_id: UUID | None) -> list[AuditEntry]:
        with self._lock:
            found = [e for e in self._audit if e.job_id == job_id]
        return found[-1000:] if job_id is None else found

    def workers_list(self) -> list[WorkerInfo]:
        with self._lock:
            return sorted(self._workers.values(), key=lambda w: (w.started_at, w.id))

    def schedules_list(self) -> list[ScheduleState]:
        with self._lock:
            return [ScheduleState(name, at, self._schedule_updated[name], self._schedule_paused.get(name))
                    for name, at in sorted(self._schedules.items())]

    # -- reading -------------------------------------------------------------

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

