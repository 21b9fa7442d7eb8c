"""The read side (``store.reads.Reads``): pages of jobs, dead letters and
outbox rows, facets, queue counts (the waiting jobs' index walked up to a
bound, then "at least"), what ended lately, rollups, schedules, workers,
the audit trail, breakers' history and the alerts firing."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from uuid import UUID

from redrive.core.job import DeadLetter, DeadLetterFilter, Job
from redrive.core.outbox import OutboxRow, OutboxStatus
from redrive.core.progress import Progress, loaded
from redrive.core.rollups import rollup_range
from redrive.core.states import ACTIVE_ORDER, Status
from redrive.store.port import BreakerEvent
from redrive.store.reads import (
    LOWER_BOUND_AT,
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
    rollups_of,
    tables_of,
    tallied,
)
from redrive.store.sqlite.codecs import _audit, _dead_letter, _epoch, _job, _letter_filter, _outbox_row, _time
from redrive.store.sqlite.operations import Operations


class Reading(Operations):
    def jobs_page(self, *, where: JobFilter, after: str | None = None, limit: int = 50) -> Page[Job]:
        size, key = page_size(limit), decode_cursor(after, 2)
        rows = self._read("jobs_page" if where.owner is None else "jobs_page_owned", {
            "statuses": None if where.statuses is None else json.dumps([str(s) for s in where.statuses]),
            "queue": where.queue, "task": where.task, "owner": where.owner, "error_code": where.error_code,
            "idempotency_key": where.idempotency_key,
            "created_after": _epoch(where.created_after), "created_before": _epoch(where.created_before),
            "after_at": None if key is None else key[0], "after_id": None if key is None else key[1],
            "limit": size + 1, **tables_of(where.statuses),
        })
        page = paged(rows, size, lambda row: encode_cursor(row["created_at"], row["id"]))
        return Page([_job(row) for row in page.items], page.next_cursor)

    def queues_stats(self, *, exact_up_to: int | None = None) -> list[QueueStats]:
        cap = max(LOWER_BOUND_AT, exact_up_to or 0)

        def body(conn: sqlite3.Connection, now: float) -> list[QueueStats]:
            stats: dict[str, QueueStats] = {}
            for row in conn.execute(self._queries["queues_stats"], {"now": now, "cap": cap}):
                queue = stats.setdefault(row["queue"], QueueStats(row["queue"], dict.fromkeys(ACTIVE_ORDER, 0)))
                queue.counts[Status(row["status"])] = row["n"]
                if row["n"] >= cap and row["status"] != "running":
                    stats[row["queue"]] = queue = replace(queue, at_least=True)
                if row["oldest_due"] is not None:
                    age = now - row["oldest_due"]
                    if queue.oldest_due_age_s is None or age > queue.oldest_due_age_s:
                        stats[row["queue"]] = queue = replace(queue, oldest_due_age_s=age)
                if row["oldest_running"] is not None:
                    stats[row["queue"]] = replace(queue, oldest_running_age_s=now - row["oldest_running"])
            return list(stats.values())

        return self._reading(body)

    def runs_ended(self, *, since: datetime, limit: int = 10_000) -> list[RunEnded]:
        return [RunEnded(_time(row["at"]), row["task"], bool(row["failed"]), row["duration_s"])
                for row in self._read("runs_ended", {"since": since.timestamp(), "limit": limit})]

    def rollups_read(self, *, since: datetime, slot: timedelta = timedelta(minutes=1), by: str = "queue",
                     timed: bool = True) -> list[Rollup]:
        return rollups_of(self._read("rollups_read", rollup_range(since, slot, by, timed)))

    def dead_letter_get(self, *, id: int) -> DeadLetter | None:
        rows = self._read("dead_letter_get", {"id": id})
        return _dead_letter(rows[0]) if rows else None

    def progress_read(self, *, job_ids: Sequence[UUID]) -> dict[UUID, Progress]:
        rows = self._read("progress_read", {"ids": json.dumps([str(i) for i in job_ids])}) if job_ids else []
        return {UUID(r["job_id"]): loaded(json.loads(r["value"]), _time(r["at"])) for r in rows}

    def dead_letters_page(
        self, *, where: DeadLetterFilter, after: str | None = None, limit: int = 50,
    ) -> Page[DeadLetter]:
        size, key = page_size(limit), decode_cursor(after, 1)
        rows = self._reading(lambda conn, now: conn.execute(self._queries["dead_letters_page"], {
            **_letter_filter(where), "now": now, "limit": size + 1,
            "after_id": None if key is None else key[0]}).fetchall())
        page = paged(rows, size, lambda row: encode_cursor(row["id"]))
        return Page([_dead_letter(row) for row in page.items], page.next_cursor)

    def dead_letter_facets(self, *, where: DeadLetterFilter) -> DeadLetterFacets:
        if (counted := tallied(where)) is not None:
            return DeadLetterFacets.of(map(dict, self._read("dead_letters_tally", counted)))
        rows = self._reading(lambda conn, now: conn.execute(
            self._queries["dead_letter_facets"], {**_letter_filter(where), "now": now}).fetchall())
        return DeadLetterFacets.of(rows)

    def outbox_page(
        self, *, status: OutboxStatus | None = None, job_id: UUID | None = None, after: str | None = None,
        limit: int = 50,
    ) -> Page[OutboxRow]:
        size, key = page_size(limit), decode_cursor(after, 2)
        rows = self._read("outbox_page", {
            "status": status.value if status else None, "job_id": str(job_id) if job_id else None,
            "after_at": None if key is None else key[0], "after_key": None if key is None else key[1],
            "limit": size + 1})
        page = paged(rows, size, lambda row: encode_cursor(row["created_at"], row["key"]))
        return Page([_outbox_row(row) for row in page.items], page.next_cursor)

    def schedules_list(self) -> list[ScheduleState]:
        return [ScheduleState(row["name"], _time(row["fired_until"]), _time(row["updated_at"]), row["paused_by"])
                for row in self._read("schedules_list")]

    def workers_list(self) -> list[WorkerInfo]:
        return [WorkerInfo.of(row, queues=json.loads(row["queues"]), started_at=_time(row["started_at"]),
                              heartbeat_at=_time(row["heartbeat_at"]))
                for row in self._read("workers_list")]

    def audits_list(self, *, job_id: UUID | None) -> list[AuditEntry]:
        if job_id is None:
            return [_audit(row) for row in self._read("audits_general", {})]
        return [_audit(row) for row in self._read("audits_list", {"job_id": str(job_id)})]

    def breaker_events_list(self, *, name: str) -> list[BreakerEvent]:
        return [
            BreakerEvent(name=row["name"], at=_time(row["at"]), from_state=row["from_state"],
                         to_state=row["to_state"], reason=row["reason"], by=row["by"])
            for row in self._read("breaker_events_list", {"name": name})
        ]

    def alerts_firing(self) -> dict[str, str]:
        return {row["rule"]: row["incident"] for row in self._read("alerts_firing")}
