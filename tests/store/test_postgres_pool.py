"""PostgresStore's pool: one thread's calls stay on one warm connection."""

from __future__ import annotations

import uuid

from redrive.core.job import NewJob
from redrive.store.postgres.store import PostgresStore


def test_calls_from_one_thread_use_one_connection(pg_url: str) -> None:
    # A pool hands its connections out in turn; had the first call found the
    # first connection not yet made, the pool would have opened a second and
    # every later call would alternate between two backends.
    store = PostgresStore(pg_url)
    try:
        for _ in range(10):
            store.jobs_insert(jobs=[NewJob(id=uuid.uuid4(), task="t", queue="default", args=[],
                                           kwargs={}, priority=0, max_attempts=3)])
        stats = store._pool.get_stats()
        assert (stats["pool_size"], stats.get("requests_queued", 0)) == (1, 0), stats
    finally:
        store.close()
