"""What the runtime asks besides endings, in memory: enqueue, the claim
(with limits), leases, pauses and cancels, the worker registry, breakers,
outbox rows, schedules, pruning and the rollups."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from redrive.core.breaker import Breaker
from redrive.core.job import EnqueueResult, Job, Lease, NewJob, refuse_reuse, takes_over
from redrive.core.limits import Candidate, Limits, Permit, keys_of, pick, usage_of
from redrive.core.outbox import OutboxChange, OutboxRow, OutboxStatus
from redrive.core.rollups import rollup_folds
from redrive.core.states import TERMINAL, Status
from redrive.errors import ConfigError
from redrive.store.memory.endings import Endings
from redrive.store.port import WORKER_FORGOTTEN_AFTER_S, BreakerEvent, Control, WorkerReport, worker_detail
from redrive.store.reads import WorkerInfo


class Work(Endings):
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
                status = Status.PENDING if new.waits else Status.SCHEDULED if run_at > now else Status.QUEUED
                job = replace(new, args=list(new.args), kwargs=dict(new.kwargs)).created(
                    status=status, run_at=run_at, at=now)
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

    def schedule_advance(self, *, name: str, to: datetime) -> None:
        with self._lock:
            self._schedules[name] = max(self._schedules.get(name, to), to)
            self._schedule_updated[name] = self._clock()

    def jobs_prune(self, *, older_than: timedelta, limit: int = 10_000) -> int:
        with self._lock:
            before = self._clock() - older_than
            held = {d.job_id for d in self._letters.values() if d.state == "open"}
            held |= {parent for parent, children in self._edges.items()  # a step after it still waits
                     if any((c := self._jobs.get(child)) is not None and c.status not in TERMINAL for child in children)}
            finished = [(j.finished_at, j) for j in self._jobs.values()
                        if j.status in TERMINAL and j.finished_at is not None and j.id not in held]
            doomed = [j for at, j in sorted(finished, key=lambda pair: pair[0]) if at < before][:limit]
            return len(self._forget({j.id for j in doomed}))

    def _forget(self, gone: set[UUID]) -> set[UUID]:
        """Finished jobs gone, with their events, letters, keys, requests and workflow places (the lock held)."""
        for job_id in gone:
            del self._jobs[job_id]
        self._events = [e for e in self._events if e.job_id not in gone]
        self._letters = {i: d for i, d in self._letters.items() if d.job_id not in gone}
        self._keys = {name: key for name, key in self._keys.items() if key[1] not in gone}
        for job_id in gone:
            self._cancel_requests.pop(job_id, None)
            self._progress.pop(job_id, None)
            self._steps.pop(job_id, None)
            self._edges.pop(job_id, None)
        for children in self._edges.values():
            for job_id in gone & children.keys():
                del children[job_id]
        return gone

    def control_read(self, *, job_ids: Sequence[UUID]) -> Control:
        with self._lock:
            asked = {job_id: self._cancel_requests[job_id] for job_id in job_ids if job_id in self._cancel_requests}
            return Control(paused=dict(self._paused), cancels=asked)

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
