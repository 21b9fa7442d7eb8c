from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.processes import WorkerProcess


@pytest.fixture
def workers(tmp_path) -> Iterator[list[WorkerProcess]]:
    """Workers a test starts; whatever is left is killed at the end."""
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.kill()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'redrive.db'}"
    return request.getfixturevalue("pg_url")
