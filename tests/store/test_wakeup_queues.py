"""Stores that can tell which queue has new jobs say so in the wake-up
(SQLite's watcher cannot: it hears any commit, and says ANY_QUEUE)."""

from __future__ import annotations

import threading
import time

import pytest

from redrive.store.memory import MemoryStore
from redrive.store.port import Store
from redrive.store.postgres.store import PostgresStore
from redrive.testing import new


@pytest.fixture(params=["memory", "postgres"])
def naming_store(request) -> Store:
    made = MemoryStore() if request.param == "memory" else PostgresStore(request.getfixturevalue("pg_url"))
    yield made
    made.close()


def test_a_wake_up_names_the_queue(naming_store: Store) -> None:
    heard: list[str] = []
    woken = threading.Event()
    unsubscribe = naming_store.wakeups_subscribe(lambda queue: (heard.append(queue), woken.set()))
    try:
        deadline = time.monotonic() + 5
        while not woken.wait(0.2):  # the listener starts in a thread of the store's
            naming_store.jobs_insert(jobs=[new(queue="email")])
            assert time.monotonic() < deadline, "no wake-up within 5 s"
        assert set(heard) == {"email"}
    finally:
        unsubscribe()
