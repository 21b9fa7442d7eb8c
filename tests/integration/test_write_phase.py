"""The atomic write phase of seed 000 §4 on a real SQLite file and PostgreSQL:
clear old matches, insert new edges, update cluster assignments; a failure
between steps, or a lost lease, leaves the previous state intact."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from redrive import App, ConfigError, LeaseLost, Status, current_job, write_phase
from redrive.core.transitions import Requeue
from tests.integration.test_worker_in_process import _run_until


@pytest.fixture(params=["same database", "own database"])
def conn_factory(request, db_url: str, tmp_path) -> Iterator[Any]:
    """Connections to the application's database: redrive's own, or another."""
    if db_url.startswith("postgres"):
        url = db_url if request.param == "same database" else request.getfixturevalue("pg_empty_url")
        factory = lambda: psycopg.connect(url)
    else:
        path = db_url.removeprefix("sqlite:///") if request.param == "same database" else str(tmp_path / "app.db")
        factory = lambda: sqlite3.connect(path)
    conn = factory()
    for statement in ["CREATE TABLE document (id integer PRIMARY KEY, cluster_id integer)",
                      "CREATE TABLE document_match (document_a_id integer, document_b_id integer)",
                      "INSERT INTO document VALUES (1, 10), (2, 10), (3, 30)",
                      "INSERT INTO document_match VALUES (1, 2)"]:
        conn.execute(statement)
    conn.commit()
    conn.close()
    yield factory


def _merge(conn: Any, doc: int, matches: list[int], cluster: int, *, fail_after: str | None = None) -> None:
    p = "%s" if isinstance(conn, psycopg.Connection) else "?"
    with write_phase(conn):
        conn.execute(f"DELETE FROM document_match WHERE document_a_id = {p} OR document_b_id = {p}", (doc, doc))
        if fail_after == "delete":
            raise RuntimeError("injected failure after the delete")
        for other in matches:
            conn.execute(f"INSERT INTO document_match VALUES ({p}, {p})", (doc, other))
        if fail_after == "insert":
            raise RuntimeError("injected failure after the insert")
        for member in [doc, *matches]:
            conn.execute(f"UPDATE document SET cluster_id = {p} WHERE id = {p}", (cluster, member))


def _state(factory: Any) -> tuple[list, list]:
    """What another connection sees: only committed writes."""
    conn = factory()
    try:
        return (sorted(map(tuple, conn.execute("SELECT * FROM document_match").fetchall())),
                sorted(map(tuple, conn.execute("SELECT * FROM document").fetchall())))
    finally:
        conn.close()


BEFORE = ([(1, 2)], [(1, 10), (2, 10), (3, 30)])
AFTER = ([(1, 3)], [(1, 99), (2, 10), (3, 99)])


@pytest.mark.parametrize("fail_after", ["delete", "insert"])
def test_a_failure_between_steps_leaves_the_previous_state(conn_factory, fail_after: str) -> None:
    conn = conn_factory()
    with pytest.raises(RuntimeError, match="injected"):
        _merge(conn, 1, [3], 99, fail_after=fail_after)
    assert _state(conn_factory) == BEFORE
    _merge(conn, 1, [3], 99)  # the same connection is usable again, and commits
    assert _state(conn_factory) == AFTER
    conn.close()


def test_inside_a_job_the_phase_commits_only_while_the_lease_is_held(conn_factory, db_url: str) -> None:
    app = App(db_url)
    outcomes: list[str] = []

    @app.task
    def merge(steal_lease: bool) -> None:
        if steal_lease:  # as a reclaim would, while this run goes on; not due again during the test
            app.store.jobs_finish([Requeue(current_job().lease, timedelta(hours=1))])
        conn = conn_factory()
        try:
            _merge(conn, 1, [3], 99)
            outcomes.append("committed")
        except LeaseLost as exc:
            outcomes.append(str(exc))
            raise
        finally:
            conn.close()

    stolen = app.enqueue("merge", args=[True]).job
    asyncio.run(_run_until(app, lambda: outcomes))
    assert outcomes == [f"job {stolen.id} lost its lease: its write phase was rolled back"]
    assert _state(conn_factory) == BEFORE

    outcomes.clear()
    held = app.enqueue("merge", args=[False]).job
    asyncio.run(_run_until(app, lambda: app.client.job(held.id).status is Status.SUCCEEDED))
    assert outcomes == ["committed"] and _state(conn_factory) == AFTER
    app.close()


def test_a_connection_that_is_not_ready_is_refused(conn_factory) -> None:
    conn = conn_factory()
    conn.execute("UPDATE document SET cluster_id = 1 WHERE id = 1")  # opens a transaction
    with pytest.raises(ConfigError, match="no transaction open"):
        with write_phase(conn):
            pass
    conn.rollback()
    with pytest.raises(ConfigError, match="psycopg"):
        with write_phase(object()):
            pass
    conn.close()
