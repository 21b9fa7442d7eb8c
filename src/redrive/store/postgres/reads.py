"""The read side (``store.reads.Reads``): pages of jobs, dead letters and
outbox rows, facets, queue counts (exact, then PostgreSQL's own count of
live rows shared out), what ended lately, rollups, schedules, workers,
the audit trail, breakers' history and the alerts firing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from psycopg.rows import tuple_row

from redrive.core.job import DeadLetter, DeadLetterFilter, Job
from redrive.core.outbox import OutboxRow, OutboxStatus
from redrive.core.progress import Progress, loaded
from redrive.core.rollups import rollup_range
from redrive.core.states import ACTIVE_ORDER, Status
from redrive.store.port import BreakerEvent
from redrive.store.postgres.codecs import _dead_letter, _job, _letter_filter, _outbox_row
from redrive.store.postgres.operations import Operations
from redrive.store.reads import (
    COUNTED_UP_TO,
    EXACT_UP_TO,
    AuditEntry,
    DeadLetterFacets,
    JobFilter,
    Page,
    Pair,
    QueueStats,
    Rollup,
    RunEnded,
    ScheduleState,
    WorkerInfo,
    decode_cursor,
    encode_cursor,
    page_size,
    paged,
    rollups_of,
    shares,
    tables_of,
    tallied,
)


class Reading(Operations):
    def jobs_page(self, *, where: JobFilter, after: str | None = None, limit: int = 50) -> Page[Job]:
        size, key = page_size(limit), decode_cursor(after, 2)
        rows = self._run("jobs_page", {
            "statuses": None if where.statuses is None else [str(s) for s in where.statuses],
            "queue": where.queue, "task": where.task, "owner": where.owner, "error_code": where.error_code,
            "idempotency_key": where.idempotency_key, "created_after": where.created_after,
            "created_before": where.created_before,
            "after_at": None if key is None else key[0], "after_id": None if key is None else key[1],
            "limit": size + 1, **tables_of(where.statuses),
        })
        page = paged(rows, size, lambda row: encode_cursor(row["created_at"].isoformat(), str(row["id"])))
        return Page([_job(row) for row in page.items], page.next_cursor)

    def queues_stats(self, *, exact_up_to: int | None = None) -> list[QueueStats]:
        cap = max(EXACT_UP_TO, exact_up_to or 0)
        stats: dict[str, QueueStats] = {}
        waiting = [row["queue"] for row in self._run("queues_waiting")]
        rows = self._run("queues_stats", {"cap": cap, "queues": waiting})
        counts = {(row["queue"], row["status"]): row["n"] for row in rows}
        capped = [pair for pair, n in counts.items() if n >= cap and pair[1] != "running"]
        if capped:
            counts.update(self._estimated(counts, capped, cap))
        for row in rows:
            queue = stats.setdefault(row["queue"], QueueStats(row["queue"], dict.fromkeys(ACTIVE_ORDER, 0)))
            if (row["queue"], row["status"]) in capped:
                stats[row["queue"]] = queue = replace(queue, estimated=True)
            queue.counts[Status(row["status"])] = counts[row["queue"], row["status"]]
            age = row["oldest_due_age_s"]
            if age is not None and (queue.oldest_due_age_s is None or age > queue.oldest_due_age_s):
                stats[row["queue"]] = queue = replace(queue, oldest_due_age_s=age)
            if row["oldest_running_age_s"] is not None:
                stats[row["queue"]] = replace(queue, oldest_running_age_s=row["oldest_running_age_s"])
        return list(stats.values())

    def _estimated(self, counts: dict[Pair, int], capped: list[Pair], cap: int) -> dict[Pair, int]:
        """The waiting counts past ``cap``: the table's live rows (as
        PostgreSQL counts them at each commit) less every count known
        exactly, shared out among the capped (queue, state) pairs as the
        planner reckons they share; a pair whose share is small is counted
        exactly up to ``COUNTED_UP_TO`` instead. Never below the count
        known exactly."""
        (found,) = self._run("queues_estimate")
        weights = self._weights(found, capped) if len(capped) > 1 else {capped[0]: 1.0}
        floors = dict.fromkeys(capped, cap)
        exact = {pair: n for pair, n in counts.items() if pair not in floors}
        unsure = set(capped)
        while True:
            left = max(0, (found["live"] or 0) - sum(exact.values()))
            share = shares(left, {pair: weights[pair] for pair in unsure})
            small = sorted(p for p in unsure if share[p] < COUNTED_UP_TO and floors[p] < COUNTED_UP_TO)
            if not small:
                return {**exact, **{pair: max(floors[pair], share[pair]) for pair in unsure}}
            for row in self._run("queues_count", {"cap": COUNTED_UP_TO, "queues": [p[0] for p in small],
                                                  "statuses": [p[1] for p in small]}):
                pair = (row["queue"], row["status"])
                floors[pair] = row["n"]
                if row["n"] < COUNTED_UP_TO:  # counted to the end: exact after all
                    unsure.discard(pair)
                    exact[pair] = row["n"]

    def _weights(self, found: Any, pairs: list[Pair]) -> dict[Pair, float]:
        """How the planner reckons ``pairs`` share the waiting jobs: from the
        joint statistics in one statement, else (a pair too rare to be in
        them) from its plan; equal shares when the table was never analyzed."""
        if found["pairs"] is None:
            return dict.fromkeys(pairs, 1.0)
        common = dict(zip(map(tuple, found["pairs"]), found["freqs"] or (), strict=True))
        out = {}
        for pair in pairs:
            if pair in common:
                out[pair] = float(common[pair])
            else:
                (plan,) = self._run("queue_estimate", {"queue": pair[0], "status": pair[1]})[0].values()
                out[pair] = float(plan[0]["Plan"]["Plan Rows"]) / max(1.0, found["rows"] or 1.0)
        return out

    def runs_ended(self, *, since: datetime, limit: int = 10_000) -> list[RunEnded]:
        return [RunEnded(row["at"], row["task"], row["failed"], row["duration_s"])
                for row in self._run("runs_ended", {"since": since, "limit": limit})]

    def rollups_read(self, *, since: datetime, slot: timedelta = timedelta(minutes=1), by: str = "queue",
                     timed: bool = True) -> list[Rollup]:
        return rollups_of(self._run("rollups_read", rollup_range(since, slot, by, timed), rows=tuple_row))

    def dead_letter_get(self, *, id: int) -> DeadLetter | None:
        rows = self._run("dead_letter_get", {"id": id})
        return _dead_letter(rows[0]) if rows else None

    def progress_read(self, *, job_ids: Sequence[UUID]) -> dict[UUID, Progress]:
        rows = self._run("progress_read", {"ids": list(job_ids)}) if job_ids else []
        return {r["job_id"]: loaded(r["value"], r["at"]) for r in rows}

    def dead_letters_page(
        self, *, where: DeadLetterFilter, after: str | None = None, limit: int = 50,
    ) -> Page[DeadLetter]:
        size, key = page_size(limit), decode_cursor(after, 1)
        rows = self._run("dead_letters_page", {**_letter_filter(where), "limit": size + 1,
                                               "after_id": None if key is None else key[0]})
        page = paged(rows, size, lambda row: encode_cursor(row["id"]))
        return Page([_dead_letter(row) for row in page.items], page.next_cursor)

    def dead_letter_facets(self, *, where: DeadLetterFilter) -> DeadLetterFacets:
        if (counted := tallied(where)) is not None:
            return DeadLetterFacets.of(self._run("dead_letters_tally", counted))
        return DeadLetterFacets.of(self._run("dead_letter_facets", _letter_filter(where)))

    def outbox_page(
        self, *, status: OutboxStatus | None = None, job_id: UUID | None = None, after: str | None = None,
        limit: int = 50,
    ) -> Page[OutboxRow]:
        size, key = page_size(limit), decode_cursor(after, 2)
        rows = self._run("outbox_page", {
            "status": status, "job_id": job_id, "limit": size + 1,
            "after_at": None if key is None else key[0], "after_key": None if key is None else key[1]})
        page = paged(rows, size, lambda row: encode_cursor(row["created_at"].isoformat(), row["key"]))
        return Page([_outbox_row(row) for row in page.items], page.next_cursor)

    def schedules_list(self) -> list[ScheduleState]:
        return [ScheduleState(**row) for row in self._run("schedules_list")]

    def workers_list(self) -> list[WorkerInfo]:
        return [WorkerInfo.of(row) for row in self._run("workers_list")]

    def audits_list(self, *, job_id: UUID | None) -> list[AuditEntry]:
        if job_id is None:
            return [AuditEntry(**row) for row in self._run("audits_general")]
        return [AuditEntry(**row) for row in self._run("audits_list", {"job_id": job_id})]

    def breaker_events_list(self, *, name: str) -> list[BreakerEvent]:
        return [BreakerEvent(**row) for row in self._run("breaker_events_list", {"name": name})]

    def alerts_firing(self) -> dict[str, str]:
        return {row["rule"]: row["incident"] for row in self._run("alerts_firing")}
