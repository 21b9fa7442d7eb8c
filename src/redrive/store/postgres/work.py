"""What the runtime asks besides enqueueing and endings: the claim (with
limits), leases, the paused queues and cancels, the worker registry,
breakers, outbox rows, schedules, pruning and the rollups' compaction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from operator import itemgetter
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from redrive.core import checks
from redrive.core.breaker import Breaker, from_json, to_json
from redrive.core.job import Job, JobEvent, Lease
from redrive.core.limits import Candidate, Limits, Permit, keys_of, pick, rooms_of, scan_size, usage_of
from redrive.core.outbox import OutboxChange, OutboxRow
from redrive.core.rollups import rollup_folds
from redrive.core.states import Status
from redrive.core.transitions import set_aside
from redrive.errors import StoreError
from redrive.store.port import WORKER_FORGOTTEN_AFTER_S, Control, WorkerReport, worker_detail
from redrive.store.postgres.codecs import _applied, _claimed, _job, _lease_json, _leases, _outbox_change, _outbox_row
from redrive.store.postgres.endings import Endings

_DUE_ORDER = itemgetter(3, 4)  # jobs_claim's priority and run_at
_BREAKER_TRIES = 100  # each lost race means another worker's change was written: progress, not a spin


class Work(Endings):
    def jobs_claim(
        self, *, queues: Sequence[str], limit: int, worker_id: str, lease_ttl: timedelta,
        blocked: Sequence[str] = (), limits: Limits | None = None,
    ) -> list[Job]:
        params = {"queues": list(queues), "limit": limit, "worker_id": worker_id, "lease_ttl": lease_ttl,
                  "blocked": list(blocked) or None}
        if limits:
            return self._claim_within(params, limits)
        # positional: no dict per row, no 32 keywords per job; binary: six times a job, each cheap to read
        rows = self._run("jobs_claim", params, rows=tuple_row, binary=True)
        # by priority, then due time: the statement answers them in the pick's
        # order, which this keeps in one pass (sorted there, each row was copied
        # once more by the database, bench/NOTES.md)
        return self._runnable(sorted(rows, key=_DUE_ORDER))

    def _runnable(self, rows: Sequence[tuple]) -> list[Job]:
        """The claimed jobs that can run; the others fail alone (``set_aside``)."""
        jobs = [_claimed(row) for row in rows]
        self._places.keep((row[8], row[26]) for row in rows)  # lease token, ctid (places.py)
        # jsonb cannot hold NUL or a lone surrogate: only the time can be wrong
        aside = [set_aside(job.lease, problem) for job in jobs
                 if (problem := checks.stored_problem(job.run_at, "", None))]
        if not aside:
            return jobs
        self.jobs_finish(aside)
        failed = {item.lease for item in aside}
        return [job for job in jobs if job.lease not in failed]

    def _claim_within(self, params: dict[str, Any], limits: Limits) -> list[Job]:
        """A claim with limits: read the due jobs and their keys' permits
        without a lock, work out each key's room (core/limits.py), and claim
        in one statement that takes the limits' lock and picks there, on
        those rooms less the starts made since the read (migration 0033): no
        lock is held while the worker reads or decides."""
        found = self._run("jobs_due_limited", {**params, "limit": scan_size(params["limit"])})
        candidates = [Candidate(r["id"], r["queue"], r["owner"], r["dependencies"] or []) for r in found]
        if not candidates:
            return []
        keys = {c.id: [key for key, _ in keys_of(c, limits)] for c in candidates}
        read = sorted({k for ks in keys.values() for k in ks})
        permits = self._run("permits_read", {"keys": read, "keep": limits.longest})
        usage = usage_of((Permit(p["key"], p["age_s"], p["running"]) for p in permits), limits)
        # the database picks again among these, on rooms as fresh as its lock: never more
        fitting = pick(candidates, usage, limits, 2 * params["limit"])
        if not fitting:
            return []  # nothing fits by the read: no need to ask under the lock
        rooms = rooms_of(usage, read, limits)
        place = {key: n for n, key in enumerate(rooms, 1)}  # a key with no room limit is left out
        shapes: dict[tuple[int, ...], int] = {}  # most jobs count against the same few keys
        set_of = [shapes.setdefault(tuple(place[k] for k in keys[c.id] if k in place), len(shapes) + 1)
                  for c in fitting]
        width = max(1, *map(len, shapes))  # a rectangle for PostgreSQL, 0 past a set's last key
        rows = self._run("jobs_claim_chosen", {
            **params, "ids": ",".join(c.id for c in fitting), "set_of": ",".join(map(str, set_of)),
            "sets": [[*shape, *[0] * (width - len(shape))] for shape in shapes],
            "keys": list(rooms), "rooms": list(rooms.values()), "seen": max((p["seq"] for p in permits), default=0),
        }, rows=tuple_row, binary=True)
        return self._runnable(rows)

    def leases_extend(self, *, leases: Sequence[Lease], lease_ttl: timedelta) -> set[Lease]:
        if not leases:
            return set()
        rows = self._run("leases_extend", {**_leases(leases), "lease_ttl": lease_ttl})
        # an extension writes a new version of the row (a HOT update: on the same page, elsewhere on it)
        self._places.keep((row["lease_token"], row["ctid"]) for row in rows)
        held = _applied(rows)
        self._places.forget(lease.token for lease in leases if lease not in held)
        return held

    def lease_check(self, *, lease: Lease, conn: Any = None) -> bool:
        params = {"id": lease.job_id, "token": lease.token}
        if isinstance(conn, psycopg.Connection) and self._run("schema_present", conn=conn)[0]["present"]:
            # FOR SHARE: the job cannot change hands until the caller's transaction ends
            return bool(self._run("lease_lock", params, conn=conn))
        return bool(self._run("lease_lock", params))

    def control_read(self, *, job_ids: Sequence[UUID]) -> Control:
        rows = self._run("control_read", {"ids": list(job_ids)})
        return Control(paused={r["name"]: r["by"] for r in rows if r["kind"] == "pause"},
                       cancels={UUID(r["name"]): r["by"] for r in rows if r["kind"] == "cancel"})

    def worker_report(self, *, report: WorkerReport) -> None:
        self._run("worker_report", {
            **{name: getattr(report, name) for name in ("id", "host", "pid", "concurrency", "version", "running")},
            "queues": Jsonb(list(report.queues)), "detail": Jsonb(worker_detail(report)),
            "forget_after_s": WORKER_FORGOTTEN_AFTER_S})

    def worker_remove(self, *, worker_id: str) -> None:
        self._run("worker_remove", {"id": worker_id})

    def breaker_update(
        self, *, name: str, change: Callable[[Breaker, float], Breaker], by: str | None = None
    ) -> Breaker:
        # Read, decide here, write if the row is still the version read: no
        # lock is held across the round trip, so many workers never queue on
        # the row; a write that lost the race decides again from what won.
        for _ in range(_BREAKER_TRIES):
            rows = self._run("breaker_read", {"name": name, "initial": Jsonb(to_json(Breaker()))})
            if not rows:  # another worker's insert of the row, not yet visible to this read
                continue
            before = from_json(rows[0]["data"])
            after = change(before, rows[0]["now"])
            made = after.changes[len(before.changes):]
            if after == before and not made:
                return after  # nothing to write
            changes = [{"from_state": f.value, "to_state": t.value, "reason": reason} for f, t, reason in made]
            if self._run("breaker_write", {"name": name, "version": rows[0]["version"], "state": after.state.value,
                                           "data": Jsonb(to_json(after)), "changes": Jsonb(changes), "by": by}):
                return after
        raise StoreError(f"breaker {name} changed under {_BREAKER_TRIES} attempts to update it in a row")

    def breakers_list(self) -> tuple[dict[str, Breaker], float]:
        rows = self._run("breakers_list")
        now = rows[0]["now"] if rows else self.now().timestamp()
        return {row["name"]: from_json(row["data"]) for row in rows}, now

    def outbox_open(self, *, lease: Lease, key: str, token: str) -> OutboxRow | None:
        rows = self._run("outbox_open", {**_lease_json(lease), "key": key, "outbox_token": token})
        return _outbox_row(rows[0]) if rows else None

    def outbox_update(self, *, lease: Lease, key: str, change: OutboxChange) -> OutboxRow | None:
        rows = self._run("outbox_update", {**_lease_json(lease), "key": key, **_outbox_change(change)})
        return _outbox_row(rows[0]) if rows else None

    def schedule_checkpoint(self, *, name: str, now: datetime) -> datetime:
        for _ in range(2):  # a row another scheduler created this instant is visible on the second try
            rows = self._run("schedule_checkpoint", {"name": name, "now": now})
            if rows:
                return rows[0]["fired_until"]
        raise StoreError(f"schedule {name!r} has no checkpoint row")

    def schedule_advance(self, *, name: str, to: datetime) -> None:
        self._run("schedule_advance", {"name": name, "to": to})

    def jobs_prune(self, *, older_than: timedelta, limit: int = 10_000) -> int:
        return self._run("jobs_prune", {"older_than": older_than, "limit": limit})[0]["pruned"]

    def rollups_compact(self) -> int:
        now = self.now()
        return sum(self._rollups_change(name, before, grain_s)
                   for name, before, grain_s in rollup_folds(now))

    def _rollups_change(self, name: str, before: int, grain_s: int) -> int:
        with self._errors(), self._connection() as conn, conn.cursor() as cur:
            cur.execute(self._queries[name], self._with_clock({"before": before, "grain_s": grain_s}))
            return cur.rowcount

    def job_get(self, *, job_id: UUID) -> Job | None:
        rows = self._run("job_get", {"id": job_id})
        return _job(rows[0]) if rows else None

    def job_events_list(self, *, job_id: UUID, newest: int | None = None) -> list[JobEvent]:
        return [
            JobEvent(
                id=row["id"], job_id=row["job_id"], at=row["at"],
                from_status=Status(row["from_status"]) if row["from_status"] else None,
                to_status=Status(row["to_status"]), attempt=row["attempt"], meta=row["meta"],
            )
            for row in (self._run("job_events_list", {"id": job_id}) if newest is None
                        else self._run("job_events_newest", {"id": job_id, "newest": newest}))
        ]


