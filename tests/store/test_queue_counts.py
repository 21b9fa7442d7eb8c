"""Queue counts past EXACT_UP_TO waiting jobs: PostgreSQL answers the
planner's estimate and says so; SQLite counts its index up to LOWER_BOUND_AT
and then says "at least". Either way no read walks every waiting job."""

from __future__ import annotations

from datetime import timedelta

from redrive.core.states import Status
from redrive.store.postgres.store import PostgresStore
from redrive.store.reads import EXACT_UP_TO, LOWER_BOUND_AT
from redrive.store.sqlite.store import SQLiteStore
from redrive.testing import claim, new

MANY = EXACT_UP_TO + 2_000


def _fill(store) -> None:
    for _ in range(MANY // 1_000):
        store.jobs_insert(jobs=[new(queue="big") for _ in range(1_000)])
    store.jobs_insert(jobs=[new(queue="small"), new(queue="small"), new(queue="small", delay=timedelta(hours=1))])
    claim(store, 1, queues=["small"])


def test_postgres_estimates_a_queue_past_the_exact_count_and_says_so(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        _fill(store)
        with store._connection() as conn:
            conn.execute("ANALYZE redrive_job")
        # the estimate comes from the joint statistics of queue and state, for every queue at once
        (found,) = store._run("queues_estimate")
        assert ["big", "queued"] in found["pairs"] and 0.8 * (MANY + 3) <= found["rows"] <= 1.25 * (MANY + 3)
        stats = {q.queue: q for q in store.queues_stats()}
        big, small = stats["big"], stats["small"]
        assert big.estimated and 0.8 * MANY <= big.counts[Status.QUEUED] <= 1.25 * MANY
        assert big.oldest_due_age_s is not None and big.oldest_due_age_s >= 0
        assert not small.estimated
        assert small.counts == {Status.SCHEDULED: 1, Status.QUEUED: 1, Status.RUNNING: 1}
        # the plan reads the waiting jobs' index, not the table
        with store._connection() as conn:
            plans = ["\n".join(r["QUERY PLAN"] for r in conn.execute(
                "EXPLAIN " + store._queries[name], {"cap": EXACT_UP_TO, "queues": ["big", "small"]}))
                for name in ("queues_waiting", "queues_stats")]
        for plan in plans:
            assert "redrive_job_waiting" in plan and "Seq Scan on redrive_job " not in plan, plan
    finally:
        store.close()


def test_sqlite_counts_from_its_index_and_says_at_least_past_its_bound(tmp_path) -> None:
    store = SQLiteStore(str(tmp_path / "redrive.db"))
    try:
        _fill(store)
        stats = {q.queue: q for q in store.queues_stats()}
        assert not stats["big"].at_least and stats["big"].counts[Status.QUEUED] == MANY  # exact up to the bound
        assert stats["small"].counts == {Status.SCHEDULED: 1, Status.QUEUED: 1, Status.RUNNING: 1}
        for _ in range((LOWER_BOUND_AT - MANY) // 1_000 + 1):
            store.jobs_insert(jobs=[new(queue="big") for _ in range(1_000)])
        big = {q.queue: q for q in store.queues_stats()}["big"]
        assert big.at_least and big.counts[Status.QUEUED] == LOWER_BOUND_AT and not big.estimated
        plan = " ".join(str(tuple(r)) for r in store._conn.execute(
            "EXPLAIN QUERY PLAN " + store._queries["queues_stats"], {"now": 0.0, "cap": LOWER_BOUND_AT}))
        assert "redrive_job_waiting" in plan and "SCAN redrive_job " not in plan.replace("SCAN redrive_job USING", "")
    finally:
        store.close()


def test_sqlite_reads_an_owners_jobs_from_the_owner_index(tmp_path) -> None:
    """The owner's jobs page (every owner's view) is planned onto the owner
    indexes of both tables, not a walk of everyone's jobs newest first."""
    store = SQLiteStore(str(tmp_path / "redrive.db"))
    try:
        plan = " ".join(str(tuple(r)) for r in store._conn.execute(
            "EXPLAIN QUERY PLAN " + store._queries["jobs_page_owned"],
            dict.fromkeys(("statuses", "queue", "task", "error_code", "idempotency_key", "created_after",
                           "created_before", "after_at", "after_id"), None) | {"owner": "ann", "limit": 51,
                                                                                  "live": True, "done": True}))
        assert "redrive_job_owner" in plan and "redrive_job_done_owner" in plan, plan
    finally:
        store.close()
