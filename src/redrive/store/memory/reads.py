"""The read side, in memory: pages, facets, queue counts (exact), what ended
lately, rollups, schedules, workers, the audit trail, breakers' history
and the alerts firing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import UUID

from redrive.core.job import DeadLetter, DeadLetterFilter, Job
from redrive.core.outbox import OutboxRow, OutboxStatus
from redrive.core.progress import Progress
from redrive.core.rollups import UNTIMED, WAIT, rollup_range
from redrive.core.states import ACTIVE_ORDER, Status
from redrive.store.memory.operations import Operations
from redrive.store.memory.state import _int, _time_key
from redrive.store.port import BreakerEvent
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


class Reading(Operations):
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
                if job.status not in ACTIVE_ORDER:  # a workflow's pending steps are not in their queue yet
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

    def dead_letter_get(self, *, id: int) -> DeadLetter | None:
        with self._lock:
            return self._letters.get(id)

    def progress_read(self, *, job_ids: Sequence[UUID]) -> dict[UUID, Progress]:
        with self._lock:
            return {i: self._progress[i] for i in job_ids if i in self._progress}

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

    def schedules_list(self) -> list[ScheduleState]:
        with self._lock:
            return [ScheduleState(name, at, self._schedule_updated[name], self._schedule_paused.get(name))
                    for name, at in sorted(self._schedules.items())]

    def workers_list(self) -> list[WorkerInfo]:
        with self._lock:
            return sorted(self._workers.values(), key=lambda w: (w.started_at, w.id))

    def audits_list(self, *, job_id: UUID | None) -> list[AuditEntry]:
        with self._lock:
            found = [e for e in self._audit if e.job_id == job_id]
        return found[-1000:] if job_id is None else found

    def breaker_events_list(self, *, name: str) -> list[BreakerEvent]:
        with self._lock:
            return [e for e in self._breaker_events if e.name == name]

    def alerts_firing(self) -> dict[str, str]:
        with self._lock:
            return dict(self._alerts)
