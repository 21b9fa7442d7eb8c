from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.processes import WorkerProcess, kill_and_show


@pytest.fixture
def workers(tmp_path) -> Iterator[list[WorkerProcess]]:
    """Workers a test starts; whatever is left is killed at the end."""
    started: list[WorkerProcess] = []
    yield started
    kill_and_show(started)


@pytest.fixture
def db_url(request, tmp_path) -> str:
    """A database of the test's own, on each store (pytest_generate_tests)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'redrive.db'}"
    return request.getfixturevalue("pgbouncer_url" if request.param == "pgbouncer" else "pg_url")


def pytest_generate_tests(metafunc) -> None:
    """Every ``db_url`` test runs on SQLite and PostgreSQL; one marked
    ``pgbouncer`` also through PgBouncer in transaction mode."""
    if "db_url" in metafunc.fixturenames:
        stores = ["sqlite", "postgres"] + (["pgbouncer"] if metafunc.definition.get_closest_marker("pgbouncer") else [])
        metafunc.parametrize("db_url", stores, indirect=True)
