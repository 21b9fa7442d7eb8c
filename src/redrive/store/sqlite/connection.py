"""The SQLite file reached: one connection in WAL mode, writes in
``BEGIN IMMEDIATE`` transactions retried while the file is busy (up to a
long deadline, then ``StoreBusy``), reads on the same connection, the
database's clock once per transaction (or a test's), a full disk as
``StoreFull``, and the schema's migrations."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any
from uuid import UUID

from redrive.core.job import Job, JobEvent
from redrive.core.states import Status
from redrive.errors import ConfigError, StoreBusy, StoreError, StoreFull, StoreUnavailable
from redrive.settings import SQLITE_SYNCHRONOUS
from redrive.store.sql import load_migrations, load_queries
from redrive.store.sqlite.clock import FileClock
from redrive.store.sqlite.codecs import T, _job, _time

log = logging.getLogger("redrive.store.sqlite")
_PACKAGE = "redrive.store.sqlite"
_BUSY_TIMEOUT_S = 5.0
_BUSY_DEADLINE_S = 60.0
_WATCH_EVERY_S = 0.01  # how soon a worker hears of another process's commit


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


class Connected:
    """One SQLite file, its connection and its queries."""

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

    def job_get(self, *, job_id: UUID) -> Job | None:
        rows = self._read("job_get", {"id": str(job_id)})
        return _job(rows[0]) if rows else None

    def job_events_list(self, *, job_id: UUID, newest: int | None = None) -> list[JobEvent]:
        return [
            JobEvent(
                id=row["id"], job_id=UUID(row["job_id"]), at=_time(row["at"]),
                from_status=Status(row["from_status"]) if row["from_status"] else None,
                to_status=Status(row["to_status"]), attempt=row["attempt"],
                meta=json.loads(row["meta"]),
            )
            for row in (self._read("job_events_list", {"id": str(job_id)}) if newest is None
                        else self._read("job_events_newest", {"id": str(job_id), "newest": newest}))
        ]
