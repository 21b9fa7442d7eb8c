"""PostgreSQL's rollups under concurrency: workers on their own connections
write to their own shards (no one waits on another's row), and two
compactions at once move each row once."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest

from redrive.core.rollups import MINUTES_FOR, bucket_of
from redrive.core.states import Status
from redrive.core.transitions import Completion
from redrive.errors import StoreError
from redrive.store.postgres.store import PostgresStore
from redrive.testing import Clock, applied, claim, new


def _sums(store: PostgresStore) -> Counter:
    out: Counter = Counter()
    for row in store.rollups_read(since=store.now() - timedelta(days=3), by="task"):
        out[(row.key, row.kind, row.bucket)] += row.n
    return out


def test_two_workers_write_and_two_compactions_fold_at_once_without_losing_a_count(pg_url: str) -> None:
    clock = Clock()
    handles = [PostgresStore(pg_url, clock=clock) for _ in range(2)]
    try:
        first = handles[0]
        first.jobs_insert(jobs=[new(task="both") for _ in range(400)])

        def work(handle: PostgresStore) -> None:
            while jobs := claim(handle, 10):
                applied(handle.jobs_finish([Completion(job.lease, None, {"duration_ms": 7}) for job in jobs]))

        threads = [threading.Thread(target=work, args=(h,)) for h in handles]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        before = _sums(first)
        assert before == {("both", "succeeded", bucket_of(7)): 400}

        clock.advance(MINUTES_FOR + timedelta(hours=1))
        folds = [threading.Thread(target=h.rollups_compact) for h in handles]
        for thread in folds:
            thread.start()
        for thread in folds:
            thread.join(timeout=30)
        assert _sums(first) == before
        with first._connection() as conn:
            left = conn.execute("SELECT count(*) AS n, max(shard) AS shard, bool_and(at % 3600 = 0) AS hourly "
                                "FROM redrive_rollup").fetchone()
        assert left == {"n": 1, "shard": 0, "hourly": True}
    finally:
        for handle in handles:
            handle.close()


def test_a_batch_whose_rollup_fails_is_not_written(pg_url: str) -> None:
    """The endings and what they add to the rollups are one transaction: if
    the second statement fails, the first is undone and the jobs still run."""
    store = PostgresStore(pg_url)
    try:
        store.jobs_insert(jobs=[new(task="undone") for _ in range(3)])
        jobs = claim(store, 3)
        store._queries = {**store._queries, "jobs_ended": "SELECT 1 / 0"}
        with pytest.raises(StoreError):
            store.jobs_finish([Completion(job.lease, None, {"duration_ms": 7}) for job in jobs])
        assert {store.job_get(job_id=job.id).status for job in jobs} == {Status.RUNNING}
        assert _sums(store) == Counter()
    finally:
        store.close()
