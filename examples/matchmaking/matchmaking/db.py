"""The application's tables, in the database redrive uses, on SQLite or
PostgreSQL: users, the job records of the design (``UNIQUE(date,
user_id)``), the offers, and each day's run as its summary recorded it. SQL is written once with ``%s`` placeholders."""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS users (
        id text PRIMARY KEY,
        timezone text NOT NULL,
        joined_on text NOT NULL,
        interests text NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS users_timezone ON users (timezone)",
    """CREATE TABLE IF NOT EXISTS matchmaking_jobs (
        date text NOT NULL,
        timezone text NOT NULL,
        user_id text NOT NULL REFERENCES users (id),
        status text NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed')),
        offers text,
        algorithm text,
        started_at text,
        completed_at text,
        error_message text,
        retry_count integer NOT NULL DEFAULT 0,
        UNIQUE (date, user_id)
    )""",
    "CREATE INDEX IF NOT EXISTS matchmaking_jobs_status ON matchmaking_jobs (status)",
    """CREATE TABLE IF NOT EXISTS offers (
        id text PRIMARY KEY,
        date text NOT NULL,
        user_id text NOT NULL,
        candidate_id text NOT NULL,
        score real NOT NULL,
        algorithm text NOT NULL,
        offered_at text NOT NULL,
        expires_at text NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS offers_user ON offers (user_id, date)",
    # One row per run of a zone's day (the scheduled one, and each re-run),
    # written by the run's summary step once every user's job has ended.
    """CREATE TABLE IF NOT EXISTS matchmaking_runs (
        run text PRIMARY KEY,
        date text NOT NULL,
        timezone text NOT NULL,
        users integer NOT NULL,
        offers integer NOT NULL,
        failures integer NOT NULL,
        failure_rate real NOT NULL,
        fired_at text NOT NULL,
        summarized_at text NOT NULL,
        duration_s real NOT NULL,
        alerted integer NOT NULL
    )""",
)


class Db:
    """One connection, autocommit outside ``redrive.write_phase``."""

    def __init__(self, url: str, lock_timeout_ms: int = 5000) -> None:
        if url.startswith("sqlite:///"):
            # One thread uses it at a time (``connection`` keeps one a thread), but
            # the collector may close a dropped one from any thread.
            self.conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=lock_timeout_ms / 1000,
                                             isolation_level=None, check_same_thread=False)
            self.sqlite = True
        else:
            import psycopg

            self.conn = psycopg.connect(url, autocommit=True, options=f"-c lock_timeout={lock_timeout_ms}")
            self.sqlite = False
        # A kept connection (``connection`` below) is closed when it is
        # dropped (its thread ended, or it was kept for another URL), or at the
        # latest when the process exits.
        weakref.finalize(self, self.conn.close)

    def __enter__(self) -> Db:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def _sql(self, sql: str) -> str:
        return sql.replace("%s", "?") if self.sqlite else sql

    def run(self, sql: str, *params: Any) -> int:
        return int(self.conn.execute(self._sql(sql), params).rowcount)

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if self.sqlite:
            self.conn.executemany(self._sql(sql), rows)
        elif rows:
            with self.conn.cursor() as cursor:
                cursor.executemany(sql, rows)

    def rows(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        cursor = self.conn.execute(self._sql(sql), params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def one(self, sql: str, *params: Any) -> dict[str, Any] | None:
        found = self.rows(sql, *params)
        return found[0] if found else None

    def create_tables(self) -> None:
        for statement in SCHEMA:
            self.run(statement)


_kept = threading.local()


@contextmanager
def connection(url: str, lock_timeout_ms: int = 5000) -> Iterator[Db]:
    """This thread's connection to ``url``, kept between jobs (a worker runs
    jobs on a pool of threads; connecting per job cost more than the job). A
    connection that failed is closed and made again next time."""
    db: Db | None = getattr(_kept, "db", None)
    if db is None or getattr(_kept, "url", None) != url:
        db, _kept.url = Db(url, lock_timeout_ms), url
        _kept.db = db
    try:
        yield db
    except BaseException:
        if db.sqlite or db.conn.closed or db.conn.info.transaction_status != 0:  # not idle: start afresh
            db.conn.close()
            _kept.db = None
        raise
