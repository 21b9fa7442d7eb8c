from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from redrive.store.memory import MemoryStore
from redrive.store.port import Store
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SQLiteStore
from redrive.testing import Clock


def _open(kind: str, request: pytest.FixtureRequest, tmp_path: Path, clock: Clock | None) -> Store:
    if kind == "memory":
        return MemoryStore(clock=clock) if clock else MemoryStore()
    if kind == "sqlite":
        return SQLiteStore(str(tmp_path / "redrive.db"), clock=clock)
    return PostgresStore(request.getfixturevalue("pg_url"), clock=clock)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request, tmp_path) -> Iterator[Store]:
    made = _open(request.param, request, tmp_path, None)
    yield made
    made.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def timed_store(request, tmp_path, clock: Clock) -> Iterator[Store]:
    """A store on ``clock``: a test ages rows by moving it, never by sleeping."""
    made = _open(request.param, request, tmp_path, clock)
    yield made
    made.close()


@pytest.fixture
def reopen() -> Iterator[Callable[[Store], Store]]:
    """Another handle on a store's database, as another worker process holds."""
    opened: list[Store] = []

    def another(store: Store) -> Store:
        if isinstance(store, SQLiteStore):
            handle: Store = SQLiteStore(store.path)
        elif isinstance(store, PostgresStore):
            handle = PostgresStore(store.url)
        else:
            return store  # the memory store lives in one process
        opened.append(handle)
        return handle

    yield another
    for handle in opened:
        handle.close()
