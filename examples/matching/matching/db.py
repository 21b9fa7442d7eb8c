"""The application's own tables, in the database redrive uses (so the write
phase commits under the job's lease), on SQLite or PostgreSQL.

SQL is written once with ``%s`` placeholders; ``Db.run`` turns them into
SQLite's ``?``. Times are stored as ISO-8601 UTC text on SQLite and as
``timestamptz`` on PostgreSQL, and are passed in by the application, so both
compare them the same way.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS document (
        id text PRIMARY KEY,
        tenant text NOT NULL,
        counterparty text NOT NULL,
        body text NOT NULL,
        searchable_text text,
        normalized_counterparty text,
        normalized_references text,
        embedding text,
        cluster_id text,
        matching_status text,
        matching_error text,
        matching_attempts integer NOT NULL DEFAULT 0,
        matching_failed_at timestamptz,
        matching_started_at timestamptz
    )""",
    """CREATE TABLE IF NOT EXISTS document_match (
        document_a_id text NOT NULL,
        document_b_id text NOT NULL,
        confidence real NOT NULL,
        PRIMARY KEY (document_a_id, document_b_id)
    )""",
    "CREATE INDEX IF NOT EXISTS document_status ON document (matching_status)",
    "CREATE INDEX IF NOT EXISTS document_tenant ON document (tenant, normalized_counterparty)",
)


def now() -> datetime:
    return datetime.now(UTC)


class Db:
    """One connection; autocommit outside ``redrive.write_phase``."""

    def __init__(self, url: str) -> None:
        if url.startswith("sqlite:///"):
            self.conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30, isolation_level=None)
            self.conn.execute("PRAGMA busy_timeout = 30000")
            self.sqlite = True
        else:
            import psycopg

            self.conn = psycopg.connect(url, autocommit=True)
            self.sqlite = False

    def close(self) -> None:
        self.conn.close()

    def _sql(self, sql: str) -> str:
        return sql.replace("%s", "?") if self.sqlite else sql

    def _value(self, value: Any) -> Any:
        return value.astimezone(UTC).isoformat() if self.sqlite and isinstance(value, datetime) else value

    def run(self, sql: str, *params: Any) -> int:
        """Execute one statement; the number of rows it changed."""
        cursor = self.conn.execute(self._sql(sql), [self._value(p) for p in params])
        return cursor.rowcount

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        if self.sqlite:
            self.conn.executemany(self._sql(sql), [[self._value(v) for v in row] for row in rows])
        else:
            with self.conn.cursor() as cursor:
                cursor.executemany(sql, rows)

    def rows(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        cursor = self.conn.execute(self._sql(sql), [self._value(p) for p in params])
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def one(self, sql: str, *params: Any) -> dict[str, Any] | None:
        found = self.rows(sql, *params)
        return found[0] if found else None

    def create_tables(self) -> None:
        for statement in SCHEMA:
            self.run(statement)


@contextmanager
def connect(url: str) -> Iterator[Db]:
    db = Db(url)
    try:
        yield db
    finally:
        db.close()
