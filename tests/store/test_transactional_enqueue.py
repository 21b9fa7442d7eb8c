"""Enqueue inside the caller's transaction: the job exists if and only if the caller commits."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from redrive import App, ConfigError, JobRequest
from redrive.testing import count_jobs


def _app(url: str) -> App:
    app = App(url)

    @app.task
    def notify(order_id: int) -> None:
        return None

    return app


def test_sqlite_enqueue_joins_the_callers_transaction(sqlite_url: str) -> None:
    app = _app(sqlite_url)
    path = sqlite_url.removeprefix("sqlite:///")
    _ = app.store  # creates the schema
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.commit()

    # Given an order written and a job enqueued in one transaction that rolls back
    conn.execute("INSERT INTO orders VALUES (1)")
    rolled_back = app.enqueue("notify", args=[1], conn=conn).job
    conn.rollback()
    # When another one commits
    conn.execute("INSERT INTO orders VALUES (2)")
    committed = app.enqueue("notify", args=[2], conn=conn).job
    conn.commit()
    # Then only the committed job exists
    assert app.store.job_get(job_id=rolled_back.id) is None
    assert app.client.job(committed.id).args == [2]
    assert [e.to_status for e in app.client.job_events(committed.id)] == ["queued"]
    conn.close()
    app.close()


def test_postgres_enqueue_joins_the_callers_transaction(pg_url: str) -> None:
    app = _app(pg_url)
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE orders (id int PRIMARY KEY)")
        conn.commit()
        conn.execute("INSERT INTO orders VALUES (1)")
        rolled_back = app.enqueue("notify", args=[1], conn=conn).job
        # Not visible to anyone else before the commit
        assert app.store.job_get(job_id=rolled_back.id) is None
        conn.rollback()
        with conn.transaction():
            conn.execute("INSERT INTO orders VALUES (2)")
            committed = app.enqueue("notify", args=[2], conn=conn).job
    assert app.store.job_get(job_id=rolled_back.id) is None
    assert app.client.job(committed.id).args == [2]
    app.close()


def test_a_postgres_enqueue_that_starts_the_callers_transaction_waits_for_its_commit(pg_url: str) -> None:
    app = _app(pg_url)
    with psycopg.connect(pg_url) as conn:  # not in autocommit, and nothing run on it yet
        job = app.enqueue("notify", args=[1], conn=conn).job
        assert app.store.job_get(job_id=job.id) is None
        conn.rollback()
    assert app.store.job_get(job_id=job.id) is None
    app.close()


def test_a_big_postgres_batch_in_the_callers_transaction_is_all_or_nothing(pg_url: str) -> None:
    app = _app(pg_url)
    batch = [JobRequest("notify", args=[i]) for i in range(300)]  # several pipelined statements
    with psycopg.connect(pg_url) as conn:
        rolled_back = app.enqueue_many(batch, conn=conn)
        conn.rollback()
        with conn.transaction():
            committed = app.enqueue_many(batch, conn=conn)
            assert sum(count_jobs(app.store).values()) == 0  # not before the commit
    assert app.store.job_get(job_id=rolled_back[-1].job.id) is None
    assert [app.client.job(r.job.id).args for r in (committed[0], committed[-1])] == [[0], [299]]
    assert sum(count_jobs(app.store).values()) == 300
    app.close()


def test_a_connection_of_the_wrong_kind_is_refused(sqlite_url: str, pg_url: str) -> None:
    app = _app(pg_url)
    with pytest.raises(ConfigError, match="psycopg"):
        app.enqueue("notify", args=[1], conn=sqlite3.connect(":memory:"))
    app.close()


def _submit(url: str, document: int, *, rollback: bool = False) -> float:
    """What a web request does (examples/matching's ``submit``): its own
    connection and a new app, the write lock taken, its own row inserted,
    the job enqueued in that transaction, committed. Answers the seconds it took."""
    import time

    from redrive import write_phase

    started = time.monotonic()
    app = _app(url)
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS document (id INTEGER PRIMARY KEY)")
    try:
        with write_phase(conn):
            conn.execute("INSERT INTO document VALUES (?)", (document,))
            app.enqueue("notify", args=[document], conn=conn)
            if rollback:
                raise RuntimeError("the request failed after the enqueue")
    except RuntimeError:
        pass
    conn.close()
    app.close()
    return time.monotonic() - started


def test_enqueue_in_the_callers_transaction_never_waits_on_its_own_lock(tmp_path) -> None:
    """On a fresh file the store is set up through the caller's connection
    (schema in its transaction, WAL once nobody holds the lock): 50
    submits each take well under a second, and every committed document has
    its job. The first one rolling back takes the schema with it; the next
    call makes it again."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    first = _submit(url, 0, rollback=True)
    took = [first] + [_submit(url, n) for n in range(1, 50)]
    assert max(took) < 1.0, f"slowest submit took {max(took):.1f} s"
    app = _app(url)
    assert sorted(j.args[0] for j in app.client.jobs(limit=100).items) == list(range(1, 50))
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT count(*) FROM document").fetchone()[0] == 49
    app.close()


def test_a_store_opened_inside_a_callers_transaction_remakes_a_schema_rolled_back(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    app = _app(url)
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    app.enqueue("notify", args=[1], conn=conn)
    conn.execute("ROLLBACK")
    done = app.enqueue("notify", args=[2]).job  # the same store, on its own connection
    assert [j.id for j in app.client.jobs().items] == [done.id]
    conn.close()
    app.close()
