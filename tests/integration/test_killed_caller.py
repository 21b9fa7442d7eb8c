"""Transactional enqueue with the caller killed (SIGKILL) between its enqueue
and its commit: neither its row nor its job exists, nothing stays locked,
and the next caller's enqueue and a worker go on as usual."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import uuid

import psycopg
import pytest

from redrive import App, Status
from tests.figures import record
from tests.integration.processes import REPO
from tests.integration.test_worker_in_process import _run_until


def _orders(url: str) -> list[int]:
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///"), timeout=5) as conn:
            return [row[0] for row in conn.execute("SELECT id FROM orders ORDER BY id")]
    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM orders ORDER BY id")]


def _create_orders(url: str) -> None:
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    else:
        with psycopg.connect(url) as conn:
            conn.execute("CREATE TABLE orders (id int PRIMARY KEY)")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_caller_killed_before_its_commit_leaves_no_job(kind: str, request, tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'redrive.db'}" if kind == "sqlite" else request.getfixturevalue("pg_url")
    app = App(url)

    @app.task
    def notify(order: int) -> None:
        return None

    app.client.store.migrate()
    _create_orders(url)
    caller = subprocess.Popen([sys.executable, "-m", "tests.apps.caller", url, "1"], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    try:
        job_id = uuid.UUID(caller.stdout.readline().strip())  # enqueued, not committed
    finally:
        caller.send_signal(signal.SIGKILL)
        caller.wait(10)
        caller.stdout.close()
    # Neither the caller's row nor its job: the transaction died with it
    left = app.store.job_get(job_id=job_id)
    record(f"caller killed before its commit ({kind})", "jobs left by the dead transaction", int(left is not None), "0")
    assert _orders(url) == []
    assert left is None
    # Nothing stays locked: the next caller commits, and a worker runs its job
    after = notify.enqueue(2).job
    asyncio.run(_run_until(app, lambda: app.client.job(after.id).status is Status.SUCCEEDED))
    app.close()
