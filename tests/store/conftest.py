from __future__ import annotations

from collections.abc import Iterator

import pytest

from redrive.store.memory import MemoryStore
from redrive.store.port import Store
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SQLiteStore


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request, tmp_path) -> Iterator[Store]:
    if request.param == "memory":
        made: Store = MemoryStore()
    elif request.param == "sqlite":
        made = SQLiteStore(str(tmp_path / "redrive.db"))
    else:
        made = PostgresStore(request.getfixturevalue("pg_url"))
    yield made
    made.close()
