"""A refused idempotent enqueue inside the caller's own SQLite or PostgreSQL
transaction keeps the caller's writes (each store's own connection type)."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from redrive import App, IdempotencyKeyReused
from redrive.testing import count_jobs


def test_a_refusal_inside_the_callers_sqlite_transaction_keeps_the_callers_writes(sqlite_url: str) -> None:
    app = App(sqlite_url)
    app.task(lambda path: None, name="convert")
    app.enqueue("convert", kwargs={"path": "a"}, idempotency_key="doc-1")
    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    conn.execute("CREATE TABLE uploads (name TEXT)")
    conn.commit()
    conn.execute("INSERT INTO uploads VALUES ('b')")
    with pytest.raises(IdempotencyKeyReused):
        app.enqueue("convert", kwargs={"path": "b"}, idempotency_key="doc-1", conn=conn)
    dup = app.enqueue("convert", kwargs={"path": "a"}, idempotency_key="doc-1", conn=conn)
    conn.commit()
    assert dup.duplicate
    assert conn.execute("SELECT name FROM uploads").fetchall() == [("b",)]
    conn.close()
    app.close()


def test_a_refusal_inside_the_callers_postgres_transaction_keeps_the_callers_writes(pg_url: str) -> None:
    app = App(pg_url)
    app.task(lambda path: None, name="convert")
    app.enqueue("convert", kwargs={"path": "a"}, idempotency_key="doc-1")
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE uploads (name text)")
        conn.execute("INSERT INTO uploads VALUES ('b')")
        with pytest.raises(IdempotencyKeyReused):
            app.enqueue("convert", kwargs={"path": "b"}, idempotency_key="doc-1", conn=conn)
        fresh = app.enqueue("convert", kwargs={"path": "c"}, idempotency_key="doc-2", conn=conn)
        conn.commit()
        assert conn.execute("SELECT name FROM uploads").fetchall() == [("b",)]
    assert app.client.job(fresh.job.id).kwargs == {"path": "c"}
    assert sum(count_jobs(app.store).values()) == 2
    app.close()
