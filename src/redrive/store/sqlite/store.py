"""SQLiteStore: the embedded default, one file shared by worker processes on one machine.

Writes run in ``BEGIN IMMEDIATE`` transactions so a writer takes the lock up
front (a deferred transaction that upgrades can fail at once with "database is
locked", which the busy timeout does not cover); a transaction that still finds
the file locked is retried from the start, and only after a long deadline does
a caller see ``StoreBusy``.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, overload
from uuid import UUID

from redrive.core import checks, ids
from redrive.core.breaker import Breaker, from_json, to_json
from redrive.core.dead_letters import Revival, cancel_meta, distinct_jobs, escalates, fail_meta, retry_meta
from redrive.core.job import (
    DEAD_LETTER_COLUMNS,
    JOB_COLUMNS,
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
from redrive.core.limits import Candidate, Limits, Permit, keys_of, pick, scan_size, usage_of
from redrive.core.outbox import OUTBOX_COLUMNS, OutboxChange, OutboxRow, OutboxStatus
from redrive.core.rollups import rollup_folds, rollup_range, rollup_tally
from redrive.core.states import ACTIVE_ORDER, TERMINAL, Status
from redrive.core.transitions import (
    Cancellation,
    Completion,
    FailNow,
    Finish,
    Finished,
    Requeue,
    RetryLater,
    by_reclaim,
    set_aside,
    taken_back,
)
from redrive.errors import ConfigError, DeadLetterNotFound, StoreBusy, StoreError, StoreFull, StoreUnavailable
from redrive.settings import SQLITE_SYNCHRONOUS
from redrive.store.port import ANY_QUEUE, WORKER_FORGOTTEN_AFTER_S, BreakerEvent, Control, WorkerReport, worker_detail
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
from redrive.store.sql import load_migrations, load_queries
from redrive.store.sqlite.clock import FileClock
from redrive.store.times import TimeMemo

T = TypeVar("T")


log = logging.getLogger("redrive.store.sqlite")

_PACKAGE = "redrive.store.sqlite"
_BUSY_TIMEOUT_S = 5.0
_BUSY_DEADLINE_S = 60.0
_JSON_COLUMNS = ("args", "kwargs", "result", "stage_attempts", "checkpoint", "dependencies")
_TIME_COLUMNS = (
    "run_at", "lease_expires_at", "created_at", "updated_at",
    "started_at", "finished_at", "failed_at", "first_failed_at",
)
_WATCH_EVERY_S = 0.01  # how soon a worker hears of another process's commit
_NO_LEASE = {"lease_token": None, "lease_owner": None, "lease_expires_at": None}


class SQLiteStore:
    dialect = "sqlite"

    def __init__(self, path: str = "redrive.db", *, clock: Callable[[], datetime] | None = None,
                 joining: sqlite3.Connection | None = None, synchronous: str = "full") -> None:
        """``clock`` stands in for the database's clock in every transaction,
        so tests can move time instead of sleeping. ``joining``: the caller's
        connection, when the store is first opened to enqueue in its
        transaction (``enqueue(conn=...)``): that transaction may hold the
        write lock, so the store sets itself up through it, never waiting on it.
        ``synchronous``: ``full`` (a commit is on the disk when it returns) or
        ``normal`` (in WAL mode, on the disk at the next checkpoint: safe from a
        crash of the process, not from a power cut; docs/storage.md)."""
        if synchronous not in SQLITE_SYNCHRONOUS:
            raise ConfigError(f"synchronous is full or normal, not {synchronous!r}")
        self.path = path
        self._clock = clock
        self._file_clock: FileClock | None = None
        self._queries = load_queries(_PACKAGE, dialect="sqlite")
        # The job list for one owner: the same query with the owner's test
        # written so SQLite can plan it onto the owner index (migration 0019).
        catch_all = "(CAST(:owner AS TEXT) IS NULL OR owner = :owner)"
        if catch_all not in self._queries["jobs_page"]:
            raise ConfigError("jobs_page no longer tests the owner as this store expects")
        self._queries["jobs_page_owned"] = self._queries["jobs_page"].replace(catch_all, "owner = :owner")
        self._migrations = load_migrations(_PACKAGE)
        self._lock = threading.RLock()
        self._listeners: list[Callable[[str], None]] = []
        self._watcher: threading.Thread | None = None
        self._unwatched_told = False  # said once a store: a subscription per call would repeat it
        self._finish_listeners: dict[UUID, list[Callable[[], None]]] = {}
        self._closed = threading.Event()
        held = joining is not None and joining.in_transaction
        # the caller's connection until what waited on its transaction is done
        self._joined: sqlite3.Connection | None = None
        self._wal_later = False  # WAL could not be switched on without waiting
        try:
            self._conn = sqlite3.connect(
                path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            self._conn.row_factory = sqlite3.Row
            self._wal_later = held and not self._try_wal()
            if not held:
                self._retrying(lambda: self._conn.execute("PRAGMA journal_mode=WAL"))
            self._conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open SQLite database {path}: {exc}") from exc
        if clock is None and _on_disk(path):
            self._file_clock = FileClock(path)
        # The embedded store migrates itself: there is no operator step to
        # forget. Inside a caller's transaction, in it: the schema commits
        # with the caller's first job (and is made again should it roll back).
        if joining is not None and held and not self.schema_current():
            self._migrate_in(joining)
        else:
            self.migrate()

    def _settle_joined(self) -> None:
        """After the transaction the store was set up in has ended: make the
        schema again if it rolled back, and switch to WAL if that had to wait."""
        if self._wal_later:
            with self._lock:
                self._wal_later = not self._try_wal()
        if self._joined is not None and not _in_transaction(self._joined):
            self._joined = None
            self.migrate()

    def _try_wal(self) -> bool:
        """Switch to WAL if nobody holds a lock now; never wait for it."""
        self._conn.execute("PRAGMA busy_timeout=0")
        try:
            return self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
            return False
        finally:
            self._conn.execute(f"PRAGMA busy_timeout={int(_BUSY_TIMEOUT_S * 1000)}")

    def _migrate_in(self, conn: sqlite3.Connection) -> None:
        cur = conn.cursor()
        cur.row_factory = sqlite3.Row
        cur.execute("SAVEPOINT redrive_migrate")
        try:
            self._apply_migrations(cur)
        except BaseException:
            cur.execute("ROLLBACK TO redrive_migrate")
            raise
        finally:
            cur.execute("RELEASE redrive_migrate")
        self._joined = conn

    # -- transactions ----------------------------------------------------------

    def _retrying(self, fn: Callable[[], T]) -> T:
        deadline = time.monotonic() + _BUSY_DEADLINE_S
        pause = 0.005
        if self._wal_later or self._joined is not None:
            self._settle_joined()
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if _is_full(exc):
                    raise StoreFull(f"the disk of SQLite database {self.path} is full: nothing was written") from exc
                if not _is_busy(exc):
                    raise StoreError(f"SQLite refused the operation: {exc}") from exc
                if time.monotonic() > deadline:
                    raise StoreBusy(
                        f"SQLite database {self.path} stayed locked for {_BUSY_DEADLINE_S:.0f} s"
                    ) from exc
                time.sleep(pause)
                pause = min(pause * 2, 0.2)
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite refused the operation: {exc}") from exc

    def _write(self, body: Callable[[sqlite3.Connection, float], T]) -> T:
        """Run ``body(conn, now)`` in one IMMEDIATE transaction, retried whole while busy."""

        def attempt() -> T:
            with self._lock:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    result = body(self._conn, self._now(self._conn))
                    self._conn.execute("COMMIT")
                    return result
                except BaseException:
                    # SQLite may have rolled back already (a full disk does):
                    # a second ROLLBACK would hide why.
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise

        return self._retrying(attempt)

    def _read(self, name: str, params: dict[str, Any] | None = None) -> list[sqlite3.Row]:
        def attempt() -> list[sqlite3.Row]:
            with self._lock:
                return self._conn.execute(self._queries[name], params or {}).fetchall()

        return self._retrying(attempt)

    def _reading(self, body: Callable[[sqlite3.Connection, float], T]) -> T:
        """Run ``body(conn, now)`` for a read that needs the database's clock."""

        def attempt() -> T:
            with self._lock:
                return body(self._conn, self._now(self._conn))

        return self._retrying(attempt)

    def _now(self, conn: sqlite3.Connection | sqlite3.Cursor) -> float:
        if self._clock is not None:
            return self._clock().timestamp()
        if self._file_clock is not None and (now := self._file_clock.read()) is not None:
            return now
        return float(conn.execute(self._queries["now"]).fetchone()[0])

    # -- schema ----------------------------------------------------------------

    def migrate(self) -> list[int]:
        if self.schema_current():
            # No write lock for nothing: a caller holding SQLite's write lock
            # in its own transaction (enqueue with conn=) opens the store too.
            return []

        return self._write(lambda conn, _: self._apply_migrations(conn))

    def _apply_migrations(self, conn: sqlite3.Connection | sqlite3.Cursor) -> list[int]:
        conn.execute(self._queries["migration_table_create"])
        current = conn.execute(self._queries["migration_version"]).fetchone()["version"]
        applied = []
        for m in self._migrations:
            if m.version > current:
                for statement in _statements(m.sql):
                    conn.execute(statement)
                conn.execute(self._queries["migration_record"], {"version": m.version, "name": m.name})
                applied.append(m.version)
        return applied

    def schema_current(self) -> bool:
        if not self._read("migration_table_exists")[0]["present"]:
            return False
        return bool(self._read("migration_version")[0]["version"] >= self._migrations[-1].version)

    def now(self) -> datetime:
        return _time(self._reading(lambda conn, now: now))

    # -- jobs ------------------------------------------------------------------

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
            status = Status.SCHEDULED if run_at > now else Status.QUEUED
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
        if not isinstance(conn, sqlite3.Connection):
            raise ConfigError("SQLiteStore joins only an sqlite3.Connection's transaction")
        try:
            cur = conn.cursor()  # rows by name here, without changing the caller's connection
            cur.row_factory = sqlite3.Row
            if not conn.in_transaction:
                cur.execute("BEGIN")  # the caller commits; a bare savepoint would commit on release
            cur.execute("SAVEPOINT redrive_enqueue")
            try:
                results, _ = self._insert(cur, jobs, self._now(cur))
            except BaseException:
                cur.execute("ROLLBACK TO redrive_enqueue")  # nothing half-written
                raise
            finally:
                cur.execute("RELEASE redrive_enqueue")
            return results
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite refused the operation: {exc}") from exc

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

    def jobs_finish(self, items: Sequence[Finish]) -> list[Finished]:
        if not items:
            return []

        def body(conn: sqlite3.Connection, now: float) -> dict[Lease, Finished]:
            done = [item for item in items if type(item) is Completion]
            written = self._complete(conn, done, now) if done else {}
            for item in items:
                if type(item) is not Completion and item.lease not in written:
                    if (finished := self._finish_one(conn, item, now)) is not None:
                        written[item.lease] = finished
            return written

        def recorded(conn: sqlite3.Connection, now: float) -> dict[Lease, Finished]:
            written = body(conn, now)
            self._roll(conn, written.values(), now)
            return written

        written = self._write(recorded)
        if self._finish_listeners:  # someone waits on a result: most batches build nothing here
            self._finished({f.lease.job_id for f in written.values() if f.status in TERMINAL})
        return [written[lease] for lease in dict.fromkeys(item.lease for item in items) if lease in written]

    def _roll(self, conn: sqlite3.Connection, written: Iterable[Finished], now: float) -> None:
        """The endings written, added to their minute's rollups in the same transaction."""
        minute = int(now) // 60 * 60
        for (queue, task, kind, bucket), n in rollup_tally(written).items():
            conn.execute(self._queries["rollup_add"], {"at": minute, "queue": queue, "task": task,
                                                       "kind": kind, "bucket": bucket, "n": n})

    def _complete(self, conn: sqlite3.Connection, items: list[Completion], now: float) -> dict[Lease, Finished]:
        """Successes, the most common ending, in three statements for the batch."""
        # Keyed by the lease as sent: a job is moved once (the first of its lease
        # wins), and the rows removed from the hot table carry back the lease that
        # applied in the same text, so no id is parsed back for every job.
        sent: dict[tuple[str, str], tuple[dict[str, str], Completion]] = {}
        for item in reversed(items):
            lease = _lease(item.lease)
            sent[lease["id"], lease["token"]] = lease, item
        params = {"now": now, "items": json.dumps([{
            **lease, "result": None if item.result is None else json.dumps(item.result),
        } for lease, item in sent.values()])}
        moved = [row["id"] for row in conn.execute(self._queries["jobs_complete_copy"], params)]
        written, events = {}, []
        for row in conn.execute(self._queries["jobs_remove"], {"ids": json.dumps(moved)}):
            _, item = sent[row["id"], row["lease_token"]]
            written[item.lease] = Finished(item, row["task"], row["queue"], Status.SUCCEEDED, row["attempts"],
                                           row["stage"])
            events.append([row["id"], row["attempts"], dict(item.meta)])
        if events:
            conn.execute(self._queries["jobs_complete_events"], {"now": now, "moved": json.dumps(events)})
        return written

    def _finish_one(self, conn: sqlite3.Connection, item: Finish, now: float) -> Finished | None:
        # A holder's lease must not have expired; the reclaim ends exactly those.
        fence = 0.0 if by_reclaim(item) else now
        match item:
            case FailNow():
                return self._fail(conn, self._take(conn, item.lease, fence), item, now)
            case Cancellation():
                taken = self._take(conn, item.lease, fence)
                if taken is None:
                    return None
                conn.execute(self._queries["cancel_request_take"], {"id": str(item.lease.job_id)})
                self._finish(conn, taken, "cancelled", now, {"by": item.by, **item.meta})
                return Finished(item, taken["task"], taken["queue"], Status.CANCELLED, taken["attempts"],
                                taken["stage"], cancelled_by=item.by)
            case RetryLater():
                return self._retry(conn, item, now)
            case Requeue():
                row = conn.execute(self._queries["job_requeue"], {
                    **_lease(item.lease), "now": now, "fence": fence, "refund": int(item.refund),
                    "delay_s": item.delay.total_seconds(),
                }).fetchone()
                if row is None:
                    return None
                self._event(conn, str(item.lease.job_id), "running", "queued", row["attempts"], now, dict(item.meta))
                return Finished(item, row["task"], row["queue"], Status.QUEUED, row["attempts"] + item.refund,
                                row["stage"])
        return None

    def _retry(self, conn: sqlite3.Connection, item: RetryLater, now: float) -> Finished | None:
        row = conn.execute(self._queries["job_retry"], {
            **_lease(item.lease), "now": now, "fence": now, "delay_s": item.delay.total_seconds(),
            "error_code": item.error_code, "error_message": item.error_message,
            "stage": item.stage,
            "stage_attempts": None if item.stage_attempts is None else json.dumps(dict(item.stage_attempts)),
        }).fetchone()
        if row is None:
            return None
        job_id, stage = str(item.lease.job_id), row["stage"]
        asked = conn.execute(self._queries["cancel_request_take"], {"id": job_id}).fetchone()
        if asked is None:
            self._event(conn, job_id, "running", "queued", row["attempts"], now, retry_meta(
                error_code=item.error_code, delay=item.delay, stage=stage, extra=item.meta))
            return Finished(item, row["task"], row["queue"], Status.QUEUED, row["attempts"], stage)
        # A cancel was asked while it ran: the cancel wins, with the attempt's error kept.
        taken = conn.execute(self._queries["job_take_waiting"], {"id": job_id}).fetchone()
        self._finish(conn, taken, "cancelled", now, cancel_meta(
            by=asked["by"], error_code=item.error_code, stage=stage, extra=item.meta), before="running")
        return Finished(item, row["task"], row["queue"], Status.CANCELLED, row["attempts"], stage,
                        cancelled_by=asked["by"])

    def _finish(
        self, conn: sqlite3.Connection, taken: sqlite3.Row | None, status: str, now: float,
        meta: dict, before: str | None = None, **changes: Any,
    ) -> bool:
        """Move a row taken out of the hot table into history as ``status``."""
        if taken is None:
            return False
        row = dict(taken)
        row.update(_NO_LEASE, status=status, updated_at=now, finished_at=now, failed_at=None)
        row.update(changes)
        conn.execute(self._queries["job_done_insert"], row)
        self._event(conn, row["id"], before or taken["status"], status, row["attempts"], now, meta)
        return True

    def _take(self, conn: sqlite3.Connection, lease: Lease, fence: float) -> sqlite3.Row | None:
        """The running row ``lease`` holds, out of the hot table, if its lease ends after ``fence``."""
        return conn.execute(self._queries["job_take_running"], {**_lease(lease), "fence": fence}).fetchone()

    def _fail(self, conn: sqlite3.Connection, taken: sqlite3.Row | None, item: FailNow, now: float) -> Finished | None:
        if taken is None:
            return None
        error_class = item.error_class or item.error_code
        stage = item.stage or taken["stage"]
        stage_attempts = (json.dumps(dict(item.stage_attempts)) if item.stage_attempts is not None
                          else taken["stage_attempts"])
        first_failed_at = taken["first_failed_at"] or now
        previous = conn.execute(self._queries["dead_letter_previous"], {"job_id": taken["id"]}).fetchone()
        escalated = escalates(previous_error_class=previous["error_class"] if previous else None,
                              previous_replayed=bool(previous and previous["replayed_at"] is not None),
                              error_class=error_class, retryable=item.retryable)
        letter = conn.execute(self._queries["dead_letter_insert"], {
            "job_id": taken["id"], "task": taken["task"], "queue": taken["queue"],
            "owner": taken["owner"], "error_class": error_class, "error_code": item.error_code,
            "error_message": item.error_message, "retryable": item.retryable, "stage": stage,
            "stage_attempts": stage_attempts, "attempts": taken["attempts"],
            "last_stack": item.stack, "context": json.dumps(dict(item.context)),
            "first_failure_at": first_failed_at, "last_failure_at": now,
            "escalated": escalated, "previous_id": previous["id"] if previous else None,
        }).fetchone()
        meta = fail_meta(error_code=item.error_code, error_class=error_class, stage=stage,
                         dead_letter_id=letter["id"], escalated=escalated, extra=item.meta)
        self._finish(
            conn, taken, "failed", now, meta,
            error_code=item.error_code, error_message=item.error_message,
            last_error_code=item.error_code, last_error_message=item.error_message, failed_at=now,
            stage=stage, stage_attempts=stage_attempts, first_failed_at=first_failed_at,
        )
        return Finished(item, taken["task"], taken["queue"], Status.FAILED, taken["attempts"], stage,
                        dead_letter_id=letter["id"], escalated=bool(escalated))

    def _cancel_waiting(self, conn: sqlite3.Connection, job_id: str, by: str, now: float) -> bool:
        taken = conn.execute(self._queries["job_take_waiting"], {"id": job_id}).fetchone()
        return self._finish(conn, taken, "cancelled", now, {"by": by})

    def control_read(self, *, job_ids: Sequence[UUID]) -> Control:
        rows = self._read("control_read", {"ids": json.dumps([str(i) for i in job_ids])})
        return Control(paused={r["name"]: r["by"] for r in rows if r["kind"] == "pause"},
                       cancels={UUID(r["name"]): r["by"] for r in rows if r["kind"] == "cancel"})

    def queue_pause(self, *, queue: str, by: str) -> bool:
        return self._write(lambda conn, now: conn.execute(self._queries["queue_pause"], {
            "queue": queue, "by": by, "now": now}).fetchone() is not None)

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

    def queue_resume(self, *, queue: str) -> bool:
        resumed = self._write(lambda conn, now: conn.execute(self._queries["queue_resume"], {
            "queue": queue}).fetchone() is not None)
        if resumed:
            self._wake({queue})
        return resumed

    def stages_save(self, *, items: Sequence[StageDone]) -> set[Lease]:
        if not items:
            return set()
        return self._write(lambda conn, now: {item.lease for item in items if conn.execute(
            self._queries["stage_save"], {
                **_lease(item.lease), "now": now, "stage": item.stage, "output": json.dumps(item.output),
                "stage_attempts": json.dumps(dict(item.stage_attempts)), "next_stage": item.next_stage,
            }).fetchone() is not None})

    def jobs_reclaim(self, *, limit: int = 500, worker_id: str | None = None,
                     bystanders: bool = False) -> list[Finished]:
        def body(conn: sqlite3.Connection, now: float) -> list[Finished]:
            written = []
            query, params = (("jobs_held", {"worker_id": worker_id, "limit": limit}) if worker_id is not None
                             else ("jobs_expired", {"now": now, "limit": limit}))
            for row in conn.execute(self._queries[query], params).fetchall():
                ending = taken_back(Lease(UUID(row["id"]), UUID(row["lease_token"])), row["lease_owner"],
                                    last=row["attempts"] >= row["max_attempts"], crashed=worker_id is not None, bystander=bystanders)
                if (finished := self._finish_one(conn, ending, now)) is not None:
                    written.append(finished)
            self._roll(conn, written, now)
            return written

        written = self._write(body)
        self._finished({f.lease.job_id for f in written if f.status in TERMINAL})
        return written

    def jobs_delete(self, *, job_ids: Sequence[UUID]) -> list[UUID]:
        def body(conn: sqlite3.Connection, now: float) -> list[UUID]:
            picked = [row["id"] for row in conn.execute(self._queries["jobs_deletable"],
                                                        {"ids": json.dumps([str(i) for i in job_ids])})]
            self._forget(conn, picked)
            return [UUID(i) for i in picked]

        return self._write(body) if job_ids else []

    def _forget(self, conn: sqlite3.Connection, ids: list[str]) -> None:
        """Finished jobs gone, with their events, letters, keys, requests and permits."""
        doomed = json.dumps(ids)
        for name in ("prune_events", "prune_letters", "prune_keys", "prune_cancel_requests", "prune_permits",
                     "prune_jobs"):
            conn.execute(self._queries[name], {"ids": doomed})

    def jobs_prune(self, *, older_than: timedelta, limit: int = 10_000) -> int:
        def body(conn: sqlite3.Connection, now: float) -> int:
            picked = conn.execute(self._queries["jobs_prunable"], {
                "before": now - older_than.total_seconds(), "limit": limit,
            }).fetchall()
            self._forget(conn, [row["id"] for row in picked])
            return len(picked)

        return self._write(body)

    def jobs_cancel(self, *, job_ids: Sequence[UUID], by: str) -> list[Job | None]:
        def body(conn: sqlite3.Connection, now: float) -> set[UUID]:
            ended = set()
            for job_id in job_ids:
                if self._cancel_waiting(conn, str(job_id), by, now):
                    ended.add(job_id)
                else:
                    conn.execute(self._queries["cancel_request_add"], {"id": str(job_id), "by": by, "now": now})
            return ended

        ended = self._write(body) if job_ids else set()
        if ended:
            self._finished(ended)
        found = [self.job_get(job_id=job_id) for job_id in job_ids]
        return [job if job is not None and (job.id in ended or job.status is Status.RUNNING) else None
                for job in found]

    def jobs_revive(self, *, revivals: Sequence[Revival]) -> list[Job | None]:
        distinct_jobs(revivals)
        revived = self._write(lambda conn, now: [self._revive(conn, now, r) for r in revivals]) if revivals else []
        if queues := {job.queue for job in revived if job is not None}:
            self._wake(queues)
        return revived

    def _revive(self, conn: sqlite3.Connection, now: float, revival: Revival) -> Job | None:
        job_id, plan = str(revival.job_id), revival.plan
        if revival.dead_letter_id is not None and conn.execute(self._queries["dead_letter_open_check"], {
            "id": revival.dead_letter_id, "job_id": job_id,
        }).fetchone() is None:
            return None
        taken = conn.execute(self._queries["job_take_failed"], {
            "id": job_id, "failed_at": _epoch(plan.failed_at)}).fetchone()
        if taken is None:
            return None
        old = dict(taken)
        row = conn.execute(self._queries["job_revived_insert"], {
            **old, "now": now, "stage": plan.stage,
            "checkpoint": old["checkpoint"] if plan.keep_checkpoint else "{}",
            "stage_attempts": json.dumps(plan.stage_attempts), "manual_retry_count": plan.manual_retries,
        }).fetchone()
        conn.execute(self._queries["cancel_request_take"], {"id": job_id})
        letters = conn.execute(self._queries["dead_letters_mark_replayed"], {
            "job_id": job_id, "now": now, "by": plan.by, "replay_from": plan.replay_from,
        }).fetchall()
        self._event(conn, job_id, "failed", "queued", 0, now, plan.meta([r["id"] for r in letters]))
        return _job(row)

    def dead_letter_get(self, *, id: int) -> DeadLetter | None:
        rows = self._read("dead_letter_get", {"id": id})
        return _dead_letter(rows[0]) if rows else None

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

    def dead_letters_resolve(self, *, ids: Sequence[int], by: str | None, note: str | None = None) -> list[DeadLetter]:
        rows = self._write(lambda conn, now: conn.execute(self._queries["dead_letters_resolve"], {
            "ids": json.dumps(list(ids)), "by": by, "note": note, "now": now, "at": _time(now).isoformat(),
        }).fetchall())
        return sorted((_dead_letter(row) for row in rows), key=lambda d: d.id)

    def dead_letter_note(self, *, id: int, text: str, by: str | None) -> DeadLetter:
        row = self._write(lambda conn, now: conn.execute(self._queries["dead_letter_note"], {
            "id": id, "text": text, "by": by, "at": _time(now).isoformat(),
        }).fetchone())
        if row is None:
            raise DeadLetterNotFound(f"no dead letter has id {id}")
        return _dead_letter(row)

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

    def breaker_events_list(self, *, name: str) -> list[BreakerEvent]:
        return [
            BreakerEvent(name=row["name"], at=_time(row["at"]), from_state=row["from_state"],
                         to_state=row["to_state"], reason=row["reason"], by=row["by"])
            for row in self._read("breaker_events_list", {"name": name})
        ]

    # -- reading -----------------------------------------------------------------

    def job_get(self, *, job_id: UUID) -> Job | None:
        rows = self._read("job_get", {"id": str(job_id)})
        return _job(rows[0]) if rows else None

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

    def alerts_firing(self) -> dict[str, str]:
        return {row["rule"]: row["incident"] for row in self._read("alerts_firing")}

    def alert_fire(self, *, rule: str, incident: str, detail: str) -> bool:
        return self._write(lambda conn, now: conn.execute(self._queries["alert_fire"], {
            "rule": rule, "incident": incident, "detail": detail, "now": now}).fetchone() is not None)

    def alert_resolve(self, *, rule: str, incident: str) -> bool:
        return self._write(lambda conn, now: conn.execute(self._queries["alert_resolve"], {
            "rule": rule, "incident": incident}).fetchone() is not None)

    def rollups_read(self, *, since: datetime, slot: timedelta = timedelta(minutes=1), by: str = "queue",
                     timed: bool = True) -> list[Rollup]:
        return rollups_of(self._read("rollups_read", rollup_range(since, slot, by, timed)))

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

    def audit_record(self, *, by: str, action: str, job_id: UUID | None = None,
                     detail: dict[str, Any] | None = None) -> AuditEntry:
        row = self._write(lambda conn, now: conn.execute(self._queries["audit_record"], {
            "now": now, "by": by, "action": action, "job_id": None if job_id is None else str(job_id),
            "detail": json.dumps(detail or {})}).fetchone())
        return _audit(row)

    def session_open(self, *, id: str, principal: str, ttl: timedelta) -> None:
        def body(conn: sqlite3.Connection, now: float) -> None:
            conn.execute(self._queries["session_forget_expired"], {"now": now})
            conn.execute(self._queries["session_open"], {"id": id, "principal": principal, "now": now,
                                                          "ttl": ttl.total_seconds()})

        self._write(body)

    def session_read(self, *, id: str) -> str | None:
        rows = self._reading(lambda conn, now: conn.execute(self._queries["session_read"],
                                                            {"id": id, "now": now}).fetchall())
        return rows[0]["principal"] if rows else None

    def session_close(self, *, id: str) -> None:
        self._write(lambda conn, now: conn.execute(self._queries["session_close"], {"id": id}))

    def audits_list(self, *, job_id: UUID | None) -> list[AuditEntry]:
        if job_id is None:
            return [_audit(row) for row in self._read("audits_general", {})]
        return [_audit(row) for row in self._read("audits_list", {"job_id": str(job_id)})]

    def workers_list(self) -> list[WorkerInfo]:
        return [WorkerInfo.of(row, queues=json.loads(row["queues"]), started_at=_time(row["started_at"]),
                              heartbeat_at=_time(row["heartbeat_at"]))
                for row in self._read("workers_list")]

    def schedules_list(self) -> list[ScheduleState]:
        return [ScheduleState(row["name"], _time(row["fired_until"]), _time(row["updated_at"]), row["paused_by"])
                for row in self._read("schedules_list")]

    def schedule_pause(self, *, name: str, by: str, now: datetime) -> bool:
        return bool(self._write(lambda conn, clock: conn.execute(self._queries["schedule_pause"], {
            "name": name, "by": by, "at": now.timestamp(), "now": clock}).fetchall()))

    def schedule_resume(self, *, name: str) -> bool:
        return bool(self._write(lambda conn, clock: conn.execute(self._queries["schedule_resume"], {
            "name": name, "now": clock}).fetchall()))

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

    def job_events_list(self, *, job_id: UUID) -> list[JobEvent]:
        return [
            JobEvent(
                id=row["id"], job_id=UUID(row["job_id"]), at=_time(row["at"]),
                from_status=Status(row["from_status"]) if row["from_status"] else None,
                to_status=Status(row["to_status"]), attempt=row["attempt"],
                meta=json.loads(row["meta"]),
            )
            for row in self._read("job_events_list", {"id": str(job_id)})
        ]

    # -- wake-ups ------------------------------------------------------------------

    def wakeups_subscribe(self, on_wake: Callable[[str], None]) -> Callable[[], None]:
        # Jobs enqueued through this store are announced at once. Another
        # process's commits show as a new PRAGMA data_version on a connection
        # of our own, looked at every few milliseconds (a hint, like NOTIFY:
        # workers also poll).
        with self._lock:
            self._listeners.append(on_wake)
            self._ensure_watcher()
        return lambda: self._listeners.remove(on_wake)

    def _ensure_watcher(self) -> None:
        if self._watcher is None or not self._watcher.is_alive():  # none yet, or it stopped on an error
            # The version the watch starts from is read here, before the
            # subscriber's call returns: a commit made after it is seen
            # however late the thread gets to run.
            conn = None
            try:
                conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, check_same_thread=False)
                last = conn.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as exc:
                if conn is not None:
                    conn.close()
                self._unwatched(exc)
                return
            self._watcher = threading.Thread(target=self._watch, args=(conn, last), name="redrive-sqlite-watch",
                                             daemon=True)
            self._watcher.start()
            self._unwatched_told = False  # watching again: a later failure is news

    def _watch(self, conn: sqlite3.Connection, last: int) -> None:
        try:
            while not self._closed.wait(_WATCH_EVERY_S):
                version = conn.execute("PRAGMA data_version").fetchone()[0]
                if version != last:
                    last = version
                    self._wake({ANY_QUEUE})
        except sqlite3.Error as exc:
            self._unwatched(exc)
        finally:
            conn.close()

    def _unwatched(self, exc: sqlite3.Error) -> None:
        # workers still poll: say so (once, not at every subscription that retries) and carry on without
        if not self._unwatched_told:
            self._unwatched_told = True
            log.warning("cannot watch %s for other processes' jobs, polling only: %s", self.path, exc)

    def _wake(self, queues: set[str]) -> None:
        for queue in queues:
            for on_wake in list(self._listeners):
                on_wake(queue)
        if ANY_QUEUE in queues:  # another process committed: any awaited job may have ended
            self._finished(None)

    def finishes_subscribe(self, *, job_id: UUID, on_finish: Callable[[], None]) -> Callable[[], None]:
        # This process's own endings are told after their commit; another
        # process's show through the data_version watch, as wake-ups do.
        with self._lock:
            self._finish_listeners.setdefault(job_id, []).append(on_finish)
            self._ensure_watcher()

        def stop() -> None:
            with self._lock:
                self._finish_listeners[job_id].remove(on_finish)

        return stop

    def _finished(self, job_ids: Iterable[UUID] | None) -> None:
        """Tell waiters that these jobs (None: any) may have ended."""
        if not self._finish_listeners:
            return
        with self._lock:
            wanted = [f for job_id, fs in self._finish_listeners.items()
                      if job_ids is None or job_id in job_ids for f in fs]
        for on_finish in wanted:
            on_finish()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            self._conn.close()
        if self._file_clock is not None:
            self._file_clock.close()


def _on_disk(path: str) -> bool:
    return path not in ("", ":memory:") and not path.startswith("file:")


def _is_full(exc: sqlite3.OperationalError) -> bool:
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(exc)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


def _in_transaction(conn: sqlite3.Connection) -> bool:
    try:
        return conn.in_transaction
    except sqlite3.ProgrammingError:  # closed
        return False


def _statements(script: str) -> Iterator[str]:
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer
            buffer = ""
    if buffer.strip() and not all(l.strip().startswith("--") or not l.strip() for l in buffer.splitlines()):
        raise StoreError("a migration ends with an incomplete statement")


@overload
def _time(value: float) -> datetime: ...
@overload
def _time(value: None) -> None: ...
def _time(value: float | None) -> datetime | None:
    return None if value is None else _times(value)


def _from_epoch(value: float) -> datetime:
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):  # outside the years 1 to 9999
        return checks.TIME_FLOOR if value < 0 else checks.TIME_CEILING


_times = TimeMemo(_from_epoch)


def _audit(row: sqlite3.Row) -> AuditEntry:
    return AuditEntry(row["id"], _time(row["at"]), row["by"], row["action"],
                      None if row["job_id"] is None else UUID(row["job_id"]), json.loads(row["detail"]))


def _epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _letter_filter(where: DeadLetterFilter) -> dict[str, Any]:
    return {
        "error_class": where.error_class, "stage": where.stage, "task": where.task, "owner": where.owner,
        "state": where.state, "older_than_s": None if where.older_than is None else where.older_than.total_seconds(),
        "newer_than_s": None if where.newer_than is None else where.newer_than.total_seconds(),
        "job_id": None if where.job_id is None else str(where.job_id),
    }


def _lease(lease: Lease) -> dict[str, str]:
    return {"id": str(lease.job_id), "token": lease.token.hex}


def _dead_letter(row: sqlite3.Row) -> DeadLetter:
    values = {name: row[name] for name in DEAD_LETTER_COLUMNS}
    values["job_id"] = UUID(values["job_id"])
    for name in ("stage_attempts", "context", "notes"):
        values[name] = json.loads(values[name])
    for name in ("first_failure_at", "last_failure_at", "replayed_at", "resolved_at"):
        values[name] = _time(values[name])
    values["retryable"] = bool(values["retryable"])
    values["escalated"] = bool(values["escalated"])
    return DeadLetter(**values)


def _outbox_row(row: sqlite3.Row) -> OutboxRow:
    values = {name: row[name] for name in OUTBOX_COLUMNS}
    values.update(status=OutboxStatus(values["status"]), job_id=UUID(values["job_id"]),
                  notified_at=_time(values["notified_at"]), created_at=_time(values["created_at"]),
                  updated_at=_time(values["updated_at"]))
    return OutboxRow(**values)


# The payload a claim builds with json_array(): one value, no space around it,
# so the decoder's own step suffices (json.loads checks for a byte-order mark
# and trailing space first: a third of the call).
_payload = json.JSONDecoder().raw_decode


def _claimed(row: sqlite3.Row) -> tuple[Job, str | None]:
    """A row of ``jobs_claim``, in its column order, and why it cannot run (or None)."""
    (id, task, queue, priority, run_at, attempts, max_attempts, owner, lease_token, lease_owner,
     lease_expires_at, last_error_code, last_error_message, created_at, updated_at, started_at,
     stage, manual_retry_count, first_failed_at, idempotency_key, version, payload) = row
    (args, kwargs, stage_attempts, checkpoint, dependencies), _ = _payload(payload)
    job = Job(
        ids.uuid_from_text(id), task, queue, args, kwargs, Status.RUNNING, priority, _time(run_at), attempts,
        max_attempts, owner, ids.uuid_from_text(lease_token), lease_owner, _time(lease_expires_at),
        last_error_code, last_error_message, None, None, None, _time(created_at),
        _time(updated_at), _time(started_at), None, None, stage, stage_attempts, checkpoint,
        manual_retry_count, _time(first_failed_at), dependencies, idempotency_key, version,
    )
    return job, checks.stored_problem(job.run_at, payload, [args, kwargs, checkpoint])


def _job(row: sqlite3.Row) -> Job:
    values = {name: row[name] for name in JOB_COLUMNS}
    values["id"] = UUID(values["id"])
    values["status"] = Status(values["status"])
    if values["lease_token"] is not None:
        values["lease_token"] = UUID(values["lease_token"])
    for name in _JSON_COLUMNS:
        if values[name] is not None:
            values[name] = json.loads(values[name])
    for name in _TIME_COLUMNS:
        values[name] = _time(values[name])
    return Job(*values.values())  # in JOB_COLUMNS order; positional is cheaper
