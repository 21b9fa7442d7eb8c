"""What the runtime asks besides enqueueing and endings: the claim (with
limits), leases, the paused queues and cancels, the worker registry,
breakers, outbox rows, schedules, pruning and the rollups' compaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from redrive.core.breaker import Breaker, from_json, to_json
from redrive.core.job import Job, Lease
from redrive.core.limits import Candidate, Limits, Permit, keys_of, pick, scan_size, usage_of
from redrive.core.outbox import OutboxChange, OutboxRow
from redrive.core.rollups import rollup_folds
from redrive.core.transitions import set_aside
from redrive.store.port import WORKER_FORGOTTEN_AFTER_S, Control, WorkerReport, worker_detail
from redrive.store.sqlite.codecs import _claimed, _lease, _outbox_row, _time
from redrive.store.sqlite.endings import Endings


class Work(Endings):
    def jobs_claim(
        self, *, queues: Sequence[str], limit: int, worker_id: str, lease_ttl: timedelta,
        blocked: Sequence[str] = (), limits: Limits | None = None,
    ) -> list[Job]:
        def body(conn: sqlite3.Connection, now: float) -> list[tuple[Job, str | None]]:
            where = {"now": now, "queues": json.dumps(list(queues)), "limit": limit,
                     "blocked": json.dumps(list(blocked)) if blocked else None}
            if limits:
                due, keys = self._within(conn, where, limits, limit, now)
            else:
                due = [[row["id"], row["status"]] for row in conn.execute(self._queries["jobs_due"], where)]
            if not due:
                return []
            # One statement per batch, not per job: each statement costs more
            # in Python than SQLite spends on a row.
            params = {"due": json.dumps(due), "now": now, "worker_id": worker_id,
                      "lease_ttl_s": lease_ttl.total_seconds()}
            rows = {row[0]: row for row in conn.execute(self._queries["jobs_claim"], params)}
            conn.execute(self._queries["jobs_claim_events"], {  # row[5]: the attempt it starts
                "now": now, "meta": json.dumps({"worker": worker_id}),
                "claimed": json.dumps([[job_id, status, rows[job_id][5]] for job_id, status in due])})
            if limits:  # row[8]: the new lease token
                conn.execute(self._queries["permits_add"], {"now": now, "permits": json.dumps([
                    [key, job_id, rows[job_id][8]] for job_id, _ in due for key in keys[job_id]])})
            return [_claimed(rows[job_id]) for job_id, _ in due]

        return self._runnable(self._write(body))

    def _runnable(self, claimed: list[tuple[Job, str | None]]) -> list[Job]:
        """The claimed jobs that can run; the others fail alone (``set_aside``)."""
        aside = [set_aside(job.lease, problem) for job, problem in claimed if problem]
        if aside:
            self.jobs_finish(aside)
        return [job for job, problem in claimed if not problem]

    def _within(self, conn: sqlite3.Connection, where: dict[str, Any], limits: Limits, limit: int,
                now: float) -> tuple[list[list[Any]], dict[str, list[str]]]:
        """The due jobs that fit the limits (we hold the write lock: nobody else claims meanwhile)."""
        found = conn.execute(self._queries["jobs_due_limited"], {**where, "limit": scan_size(limit)})
        rows = {row["id"]: row for row in found}
        candidates = [Candidate(r["id"], r["queue"], r["owner"], json.loads(r["dependencies"])) for r in rows.values()]
        keys = {c.id: [key for key, _ in keys_of(c, limits)] for c in candidates}
        read = json.dumps(sorted({k for ks in keys.values() for k in ks}))
        conn.execute(self._queries["permits_forget"], {"now": now, "keys": read,
                                                       "keep_s": limits.longest.total_seconds()})
        permits = conn.execute(self._queries["permits_read"], {"now": now, "keys": read})
        usage = usage_of((Permit(p["key"], p["age_s"], bool(p["running"])) for p in permits), limits)
        chosen = pick(candidates, usage, limits, limit)
        return [[c.id, rows[c.id]["status"]] for c in chosen], keys

    def leases_extend(self, *, leases: Sequence[Lease], lease_ttl: timedelta) -> set[Lease]:
        def body(conn: sqlite3.Connection, now: float) -> set[Lease]:
            return {
                lease for lease in leases
                if conn.execute(self._queries["lease_extend"], {
                    **_lease(lease), "now": now, "lease_ttl_s": lease_ttl.total_seconds(),
                }).fetchone()
            }

        return self._write(body) if leases else set()

    def lease_check(self, *, lease: Lease, conn: Any = None) -> bool:
        if isinstance(conn, sqlite3.Connection) and conn.execute(self._queries["schema_present"]).fetchone():
            # the caller holds the write lock (BEGIN IMMEDIATE): nobody can take the job until it commits
            params = {**_lease(lease), "now": self._now(conn)}
            return conn.execute(self._queries["lease_held"], params).fetchone() is not None
        return self._reading(lambda conn, now: conn.execute(
            self._queries["lease_held"], {**_lease(lease), "now": now}).fetchone() is not None)

    def control_read(self, *, job_ids: Sequence[UUID]) -> Control:
        rows = self._read("control_read", {"ids": json.dumps([str(i) for i in job_ids])})
        return Control(paused={r["name"]: r["by"] for r in rows if r["kind"] == "pause"},
                       cancels={UUID(r["name"]): r["by"] for r in rows if r["kind"] == "cancel"})

    def worker_report(self, *, report: WorkerReport) -> None:
        def body(conn: sqlite3.Connection, now: float) -> None:
            conn.execute(self._queries["worker_forget"], {"now": now, "id": report.id,
                                                          "forget_after_s": WORKER_FORGOTTEN_AFTER_S})
            conn.execute(self._queries["worker_report"], {
                **{name: getattr(report, name) for name in ("id", "host", "pid", "concurrency", "version", "running")},
                "queues": json.dumps(list(report.queues)), "detail": json.dumps(worker_detail(report)), "now": now})

        self._write(body)

    def worker_remove(self, *, worker_id: str) -> None:
        self._write(lambda conn, now: conn.execute(self._queries["worker_remove"], {"id": worker_id}))

    def breaker_update(
        self, *, name: str, change: Callable[[Breaker, float], Breaker], by: str | None = None
    ) -> Breaker:
        def body(conn: sqlite3.Connection, now: float) -> Breaker:
            row = conn.execute(self._queries["breaker_get"], {"name": name}).fetchone()
            before = from_json(json.loads(row["data"])) if row else Breaker()
            after = change(before, now)
            conn.execute(self._queries["breaker_upsert"], {
                "name": name, "state": after.state.value, "data": json.dumps(to_json(after)), "now": now,
            })
            for from_state, to_state, reason in after.changes[len(before.changes):]:
                conn.execute(self._queries["breaker_event_insert"], {
                    "name": name, "now": now, "from_state": from_state.value,
                    "to_state": to_state.value, "reason": reason, "by": by,
                })
            return after

        return self._write(body)

    def breakers_list(self) -> tuple[dict[str, Breaker], float]:
        rows = self._read("breakers_list")
        return {row["name"]: from_json(json.loads(row["data"])) for row in rows}, self.now().timestamp()

    def outbox_open(self, *, lease: Lease, key: str, token: str) -> OutboxRow | None:
        def body(conn: sqlite3.Connection, now: float) -> OutboxRow | None:
            params = {**_lease(lease), "key": key, "outbox_token": token, "now": now}
            if not conn.execute(self._queries["lease_held"], params).fetchone():
                return None
            conn.execute(self._queries["outbox_create"], params)
            return _outbox_row(conn.execute(self._queries["outbox_get"], params).fetchone())

        return self._write(body)

    def outbox_update(self, *, lease: Lease, key: str, change: OutboxChange) -> OutboxRow | None:
        def body(conn: sqlite3.Connection, now: float) -> OutboxRow | None:
            params = {**_lease(lease), "key": key, "now": now, "status": change.status.value,
                      "provider_id": change.provider_id, "notified": change.notified,
                      "error_code": change.error_code, "error_message": change.error_message,
                      "send_started": int(change.send_started), "reconciled": int(change.reconciled)}
            if not conn.execute(self._queries["lease_held"], params).fetchone():
                return None
            row = conn.execute(self._queries["outbox_update"], params).fetchone()
            return _outbox_row(row) if row else None

        return self._write(body)

    def schedule_checkpoint(self, *, name: str, now: datetime) -> datetime:
        known = self._read("schedule_get", {"name": name})
        if known:  # the common case costs no write
            return _time(known[0]["fired_until"])

        def body(conn: sqlite3.Connection, clock: float) -> float:
            conn.execute(self._queries["schedule_create"], {"name": name, "at": now.timestamp(), "now": clock})
            return conn.execute(self._queries["schedule_get"], {"name": name}).fetchone()["fired_until"]

        return _time(self._write(body))

    def schedule_advance(self, *, name: str, to: datetime) -> None:
        self._write(lambda conn, clock: conn.execute(self._queries["schedule_advance"], {
            "name": name, "to": to.timestamp(), "now": clock}))

    def jobs_prune(self, *, older_than: timedelta, limit: int = 10_000) -> int:
        def body(conn: sqlite3.Connection, now: float) -> int:
            picked = conn.execute(self._queries["jobs_prunable"], {
                "before": now - older_than.total_seconds(), "limit": limit,
            }).fetchall()
            self._forget(conn, [row["id"] for row in picked])
            return len(picked)

        return self._write(body)

    def _forget(self, conn: sqlite3.Connection, ids: list[str]) -> None:
        """Finished jobs gone, with their events, letters, keys, requests, permits, progress and workflow places."""
        doomed = json.dumps(ids)
        for name in ("prune_events", "prune_letters", "prune_keys", "prune_cancel_requests", "prune_permits",
                     "prune_progress", "prune_steps", "prune_edges", "prune_jobs"):
            conn.execute(self._queries[name], {"ids": doomed})

    def rollups_compact(self) -> int:
        def body(conn: sqlite3.Connection, now: float) -> int:
            changed = 0
            for name, before, grain_s in rollup_folds(datetime.fromtimestamp(now, UTC)):
                params = {"before": before, "grain_s": grain_s}
                if name == "rollups_fold":
                    conn.execute(self._queries["rollups_fold"], params)
                    name = "rollups_folded"
                changed += conn.execute(self._queries[name], params).rowcount
            return changed

        return self._write(body)
