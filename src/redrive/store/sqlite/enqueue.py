"""Enqueue: jobs and their idempotency keys, in the store's transaction or
the caller's own (a ``sqlite3`` connection to this file)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from redrive.core.job import EnqueueResult, Job, NewJob, refuse_reuse, takes_over
from redrive.core.states import Status
from redrive.errors import ConfigError, StoreError
from redrive.store.sqlite.codecs import _job, _time
from redrive.store.sqlite.watch import Watching

T = TypeVar("T")


class Enqueue(Watching):
    def _event(
        self, conn: sqlite3.Connection, job_id: str, before: str | None, after: str,
        attempt: int, now: float, meta: dict | None = None,
    ) -> None:
        conn.execute(self._queries["event_insert"], {
            "job_id": job_id, "at": now, "from_status": before, "to_status": after,
            "attempt": attempt, "meta": json.dumps(meta or {}),
        })

    def _insert(
        self, conn: sqlite3.Connection | sqlite3.Cursor, jobs: Sequence[NewJob], now: float,
    ) -> tuple[list[EnqueueResult], set[str]]:
        """The jobs as written, and the queues where one is due now."""
        results, rows, events, due = [], [], [], set()
        for new in jobs:
            if new.key is not None:
                twin = self._twin(conn, new, now)
                if twin is not None:
                    results.append(EnqueueResult(twin, duplicate=True))
                    continue
            run_at = new.run_at.timestamp() if new.run_at else now + (new.delay or timedelta(0)).total_seconds()
            status = Status.PENDING if new.waits else Status.SCHEDULED if run_at > now else Status.QUEUED
            if status is Status.QUEUED:
                due.add(new.queue)
            rows.append({
                "id": str(new.id), "task": new.task, "queue": new.queue,
                "args": json.dumps(new.args), "kwargs": json.dumps(new.kwargs),
                "status": status.value, "priority": new.priority, "run_at": run_at,
                "max_attempts": new.max_attempts, "owner": new.owner, "now": now, "stage": new.stage,
                "dependencies": json.dumps(list(new.dependencies)),
                "idempotency_key": new.key.key if new.key else None,
                "version": new.key.version if new.key else 1,
            })
            events.append({"job_id": str(new.id), "at": now, "from_status": None,
                           "to_status": status.value, "attempt": 0, "meta": json.dumps(new.created_meta)})
            results.append(EnqueueResult.created(new, status=status, run_at=_time(run_at), at=_time(now)))
        # One executemany each: SQLite's loop over the rows, not Python's.
        conn.executemany(self._queries["job_insert"], rows)
        conn.executemany(self._queries["event_insert"], events)
        return results, due

    def _twin(self, conn: sqlite3.Connection | sqlite3.Cursor, new: NewJob, now: float) -> Job | None:
        """The run ``new``'s key already points at, or None after pointing the key at ``new``.
        Runs inside the write transaction, so no other enqueue interleaves."""
        assert new.key is not None
        name = {"task": new.task, "owner": new.owner or "", "key": new.key.key}
        taken = conn.execute(self._queries["job_key_get"], name).fetchone()
        if taken is not None:
            twin = _job(conn.execute(self._queries["job_get"], {"id": taken["job_id"]}).fetchone())
            if not takes_over(new.key, taken["version"], twin.status):
                refuse_reuse(new.key, taken["version"], taken["fingerprint"])
                return twin
        conn.execute(self._queries["job_key_put"], {
            **name, "kind": new.key.kind, "version": new.key.version, "job_id": str(new.id),
            "fingerprint": new.key.fingerprint, "now": now,
        })
        return None

    def jobs_insert(self, *, jobs: Iterable[NewJob], conn: Any = None) -> list[EnqueueResult]:
        jobs = list(jobs)  # checked in full before anything is written
        if not jobs:
            return []
        if conn is None:
            results, due = self._write(lambda c, now: self._insert(c, jobs, now))
            self._wake(due)
            return results
        return self._in_callers(conn, lambda cur, now: self._insert(cur, jobs, now)[0])

    def _in_callers(self, conn: Any, body: Callable[[Any, float], T]) -> T:
        """``body(cursor, now)`` in the caller's transaction on ``conn`` (a
        ``sqlite3`` connection to this file): under a savepoint, so a refusal
        leaves nothing half-written; the caller commits."""
        if not isinstance(conn, sqlite3.Connection):
            raise ConfigError("SQLiteStore joins only an sqlite3.Connection's transaction")
        try:
            cur = conn.cursor()  # rows by name here, without changing the caller's connection
            cur.row_factory = sqlite3.Row
            if not conn.in_transaction:
                cur.execute("BEGIN")  # the caller commits; a bare savepoint would commit on release
            cur.execute("SAVEPOINT redrive_enqueue")
            try:
                return body(cur, self._now(cur))
            except BaseException:
                cur.execute("ROLLBACK TO redrive_enqueue")  # nothing half-written
                raise
            finally:
                cur.execute("RELEASE redrive_enqueue")
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite refused the operation: {exc}") from exc
