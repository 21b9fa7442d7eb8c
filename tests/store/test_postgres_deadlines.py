"""A shorter deadline for one thread's calls (``PostgresStore.calls_within``):
a stopping worker's last call must fit its time to stop, and nothing else
sharing the store may be cut short by it."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import psycopg
import pytest

from redrive import App, Worker
from redrive.errors import ConfigError, StoreTimeout
from redrive.store.port import WorkerReport
from redrive.store.postgres.store import PostgresStore
from redrive.testing import wait_for


def test_a_shorter_deadline_holds_for_its_own_thread_only(pg_url: str) -> None:
    store = PostgresStore(pg_url, deadline=timedelta(seconds=20))
    try:
        store.worker_report(report=WorkerReport("w1", "host", 1, ["default"], 1, "test", 0))
        other: dict[str, object] = {}
        inside = threading.Event()

        def remove_from_another_thread() -> None:
            inside.wait(10)
            started = time.monotonic()
            try:
                store.worker_remove(worker_id="w1")
                other["took"] = time.monotonic() - started
            except Exception as exc:  # reported below, with its type
                other["error"] = exc

        beside = threading.Thread(target=remove_from_another_thread)
        beside.start()
        with psycopg.connect(pg_url) as locker:  # holds the row: both removals wait on it
            locker.execute("SELECT 1 FROM redrive_worker WHERE id = 'w1' FOR UPDATE")
            with store.calls_within(timedelta(seconds=0.5)):
                inside.set()  # the other thread calls while this one's shorter deadline is in force
                started = time.monotonic()
                with pytest.raises(StoreTimeout, match=r"did not answer within 0\.5 s"):
                    store.worker_remove(worker_id="w1")
                took = time.monotonic() - started
            time.sleep(1.5)  # the other call waits on, past this thread's half second
            locker.rollback()
        beside.join(20)
        assert 0.4 <= took < 3, took
        assert "error" not in other, other
        assert other["took"] >= 1.5  # it waited for the lock, bounded by the store's 20 s alone
        assert [w for w in store.workers_list() if w.id == "w1"] == []
    finally:
        store.close()


def test_a_deadline_of_nothing_is_refused(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        with pytest.raises(ConfigError, match="longer than zero"), store.calls_within(timedelta(0)):
            pass
    finally:
        store.close()


def test_a_worker_bounds_its_own_calls_and_leaves_everyone_else_s(pg_url: str) -> None:
    """A worker with a short lease cuts its own store calls at half of it
    (a partitioned worker must hear of it while its leases may still hold);
    the app's enqueues and pages on the same store keep the store's deadline."""
    app = App(pg_url)
    store = app.store
    assert isinstance(store, PostgresStore)
    before = store.deadline
    worker = Worker(app.client, lease_ttl=timedelta(seconds=4), poll_interval=timedelta(milliseconds=50),
                    shutdown_grace=timedelta(0))
    running = threading.Thread(target=lambda: asyncio.run(worker.run()))
    running.start()
    try:
        wait_for(lambda: bool(store.workers_list()), timeout=10, what="the worker registered")
        assert worker._loop is not None
        inside = asyncio.run_coroutine_threadsafe(worker._call(store._deadline), worker._loop).result(10)
        assert inside == timedelta(seconds=2)
        assert store.deadline == before == store._deadline() and before > timedelta(seconds=2)
    finally:
        worker.stop()
        running.join(20)
        app.close()
