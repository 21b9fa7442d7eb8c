"""The migrations produce the schema the code expects, and the schema itself
refuses rows that break the job invariants (seed 002 §7)."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import timedelta

import psycopg
import pytest

from redrive.core.job import DEAD_LETTER_COLUMNS, EVENT_COLUMNS, JOB_COLUMNS
from redrive.errors import SchemaOutdated
from redrive.store.postgres.store import PostgresStore
from redrive.store.sql import load_migrations
from redrive.store.sqlite.store import SQLiteStore

JOB_TABLES = ("redrive_job", "redrive_job_done")


def test_sqlite_migrations_make_the_expected_tables(tmp_path) -> None:
    store = SQLiteStore(str(tmp_path / "r.db"))
    with sqlite3.connect(store.path) as conn:
        for table in JOB_TABLES:
            assert tuple(r[1] for r in conn.execute(f"PRAGMA table_info({table})")) == JOB_COLUMNS
        assert tuple(r[1] for r in conn.execute("PRAGMA table_info(redrive_job_event)")) == EVENT_COLUMNS
        assert tuple(r[1] for r in conn.execute("PRAGMA table_info(redrive_dead_letter)")) == DEAD_LETTER_COLUMNS
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.migrate() == []  # already applied: nothing to do
    store.close()


def test_postgres_migrations_make_the_expected_tables(pg_empty_url: str) -> None:
    with pytest.raises(SchemaOutdated, match="redrive migrate"):
        PostgresStore(pg_empty_url)
    store = PostgresStore(pg_empty_url, check_schema=False)
    assert store.migrate() == [m.version for m in load_migrations("redrive.store.postgres")]
    assert store.migrate() == []
    store.close()
    # each row also keeps what the events it implies say (migration 0032)
    implied = ("implied_enqueued", "implied_started", "implied_ended", "ran_by", "ended_meta",
               "ended_duration_ms", "ended_wait_ms")  # and a success's timings (migration 0037)
    expected = {"redrive_job_done": JOB_COLUMNS + implied,
                "redrive_job_event": EVENT_COLUMNS, "redrive_job_event_read": EVENT_COLUMNS,
                "redrive_dead_letter": DEAD_LETTER_COLUMNS}
    with psycopg.connect(pg_empty_url) as conn:
        def columns(table: str) -> tuple[str, ...]:
            return tuple(r[0] for r in conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = %s ORDER BY ordinal_position", (table,)))
        for table, want in expected.items():
            assert columns(table) == want
        # the live table holds the same columns, those a claim changes last (migration 0039: it logs less)
        live = columns("redrive_job")
        assert sorted(live) == sorted(JOB_COLUMNS + implied)
        assert live[-8:] == ("status", "attempts", "started_at", "implied_started", "updated_at", "lease_expires_at",
                             "lease_token", "lease_owner")
        # Events are read by job only: one index per event written, not two
        indexes = conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'redrive_job_event'").fetchall()
        assert [r[0].split(" USING ")[1] for r in indexes] == ["btree (job_id, id)"]


def test_a_version_1_database_keeps_its_jobs_through_later_migrations(tmp_path) -> None:
    from redrive.store.sqlite.connection import _statements

    path = str(tmp_path / "old.db")
    first = load_migrations("redrive.store.sqlite")[0]
    with sqlite3.connect(path) as conn:
        for statement in _statements(first.sql):
            conn.execute(statement)
        conn.execute("CREATE TABLE redrive_migration (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                     " applied_at REAL NOT NULL DEFAULT 0)")
        conn.execute("INSERT INTO redrive_migration (version, name) VALUES (1, ?)", (first.name,))
        row = _row("redrive_job", {}, times=1.0)
        conn.execute(f"INSERT INTO redrive_job ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                     list(row.values()))
    store = SQLiteStore(path)  # migrates itself
    job = store.job_get(job_id=uuid.UUID(row["id"]))
    assert job is not None and (job.stage, job.stage_attempts, job.checkpoint) == (None, {}, {})
    assert job.manual_retry_count == 0
    store.close()


def test_a_database_behind_the_code_says_to_migrate(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM redrive_migration WHERE version = (SELECT max(version) FROM redrive_migration)")
    with pytest.raises(SchemaOutdated, match="run `redrive migrate`"):
        PostgresStore(pg_url)


# Rows that break an invariant, each as (table, column overrides).
BROKEN = [
    ("redrive_job", {"result": '{"x": 1}'}),                       # result while queued
    ("redrive_job", {"error_code": "E", "error_message": "m"}),     # error while queued
    ("redrive_job", {"lease_owner": "w"}),                          # lease field while queued
    ("redrive_job", {"status": "running"}),                         # running without a lease
    ("redrive_job", {"status": "succeeded"}),                       # finished in the hot table
    ("redrive_job_done", {"status": "failed"}),                     # failed without an error
    ("redrive_job_done", {"status": "cancelled", "result": '"r"'}), # result while not succeeded
    ("redrive_job_done", {"status": "queued"}),                     # unfinished in history
    ("redrive_job_done", {"status": "succeeded", "lease_owner": "w"}),
    ("redrive_job_done", {"status": "succeeded", "finished_at": None}),
]


def _row(table: str, overrides: dict, *, times) -> dict:
    row = {
        "id": str(uuid.uuid4()), "task": "t", "queue": "q", "args": "[]", "kwargs": "{}",
        "status": "queued" if table == "redrive_job" else "succeeded", "priority": 0,
        "run_at": times, "attempts": 0, "max_attempts": 1, "created_at": times, "updated_at": times,
        "finished_at": None if table == "redrive_job" else times,
    }
    row.update(overrides)
    return row


@pytest.mark.parametrize(("table", "overrides"), BROKEN)
def test_sqlite_refuses_rows_that_break_invariants(tmp_path, table, overrides) -> None:
    store = SQLiteStore(str(tmp_path / "r.db"))
    store.close()
    row = _row(table, overrides, times=1.0)
    with sqlite3.connect(store.path) as conn, pytest.raises(sqlite3.IntegrityError):
        conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                     list(row.values()))


@pytest.mark.parametrize(("table", "overrides"), BROKEN)
def test_postgres_refuses_rows_that_break_invariants(pg_url, table, overrides) -> None:
    row = _row(table, overrides, times="2026-01-01T00:00:00Z")
    with psycopg.connect(pg_url) as conn, pytest.raises(psycopg.errors.IntegrityError):
        conn.execute(
            f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))})",
            list(row.values()),
        )


@pytest.mark.parametrize("table", JOB_TABLES)
def test_a_valid_row_is_accepted_so_the_refusals_above_mean_something(tmp_path, pg_url, table) -> None:
    store = SQLiteStore(str(tmp_path / "r.db"))
    store.close()
    row = _row(table, {}, times=1.0)
    with sqlite3.connect(store.path) as conn:
        conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                     list(row.values()))
    row = _row(table, {}, times="2026-01-01T00:00:00Z")
    with psycopg.connect(pg_url) as conn:
        conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))})",
                     list(row.values()))


def _plans(conn: psycopg.Connection, sql: str, params: dict) -> list[str]:
    """Every plan PostgreSQL ran for ``sql``, nested statements included (auto_explain)."""
    plans: list[str] = []
    conn.add_notice_handler(lambda diag: plans.append(diag.message_primary or ""))
    conn.execute("LOAD 'auto_explain'")
    conn.execute("SET auto_explain.log_min_duration = 0")
    conn.execute("SET auto_explain.log_nested_statements = on")
    conn.execute("SET auto_explain.log_level = notice")
    with conn.transaction(force_rollback=True):
        conn.execute(sql, params).fetchall()
    conn.execute("SELECT 1")  # the last plan's notice arrives with the next answer
    return plans


def test_the_postgres_claim_walks_indexes_even_when_statistics_are_stale(pg_url: str) -> None:
    """After a burst of enqueues the statistics still say the table is empty, and
    the planner prefers a bitmap scan that sorts every due job (bench/NOTES.md)."""
    from redrive import App, JobRequest

    store = PostgresStore(pg_url)
    app = App(store=store)
    app.task(lambda: None, name="noop")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ANALYZE redrive_job")  # statistics of an empty table
        for _ in range(10):
            app.enqueue_many([JobRequest("noop")] * 1000)
        naive = ("SELECT id FROM redrive_job WHERE status IN ('scheduled', 'queued') AND run_at <= now() "
                 "AND queue = ANY(%(queues)s) ORDER BY priority, run_at LIMIT 500 FOR UPDATE SKIP LOCKED")
        unpinned = _plans(conn, naive, {"queues": ["default"]})[0]
        # the hazard: every due job read and sorted (through a bitmap, or the waiting jobs' index)
        assert "Sort" in unpinned and "redrive_job_due" not in unpinned, "the hazard no longer reproduces:\n" + unpinned
        plans = _plans(conn, store._queries["jobs_claim"], {
            "queues": ["default"], "limit": 500, "worker_id": "w", "lease_ttl": timedelta(seconds=30),
            "blocked": None})
    store.close()
    [pick] = [p for p in plans if "LIMIT batch" in p]  # the pick inside redrive_pick
    assert "Index Scan using redrive_job_due" in pick, pick
    assert "Bitmap" not in pick and "Sort" not in pick, pick
    [claim] = [p for p in plans if "CTE claimed" in p]  # the update of what was picked
    assert "Tid Scan on redrive_job" in claim, claim  # where the pick found each row
    assert "Seq Scan" not in claim, claim
