"""Queue counts past EXACT_UP_TO waiting jobs: PostgreSQL estimates, never
below what it counted, and says so; SQLite counts its index up to
LOWER_BOUND_AT and then says "at least". Either way no read walks every
waiting job. An alert rule on queue depth decides on exact counts."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from redrive import App
from redrive.alerts import AlertEvaluator, QueueDepth
from redrive.core.states import Status
from redrive.store.postgres.store import PostgresStore
from redrive.store.reads import COUNTED_UP_TO, EXACT_UP_TO, LOWER_BOUND_AT
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


def _copies(url: str, queue: str, n: int) -> None:
    """``n`` waiting jobs in ``queue``, copied from one real row in one
    statement (as a bulk load or a burst of enqueues lands), and PostgreSQL
    told to count them at once rather than within ten seconds."""
    with psycopg.connect(url, autocommit=True) as conn:
        columns = [c for (c,) in conn.execute("SELECT column_name FROM information_schema.columns "
                                              "WHERE table_name = 'redrive_job' ORDER BY ordinal_position")]
        varied = {"id": "gen_random_uuid()", "queue": "%(queue)s", "run_at": "now() - make_interval(secs => g * 0.001)"}
        picked = ", ".join(varied.get(c, f"t.{c}") for c in columns)
        conn.execute(f"INSERT INTO redrive_job ({', '.join(columns)}) SELECT {picked} "
                     "FROM generate_series(1, %(n)s) AS g, (SELECT * FROM redrive_job LIMIT 1) AS t",
                     {"queue": queue, "n": n})
        conn.execute("SELECT pg_stat_force_next_flush()")


def _waiting(store, queue: str) -> tuple[int, bool]:
    found = {q.queue: q for q in store.queues_stats()}[queue]
    return found.counts[Status.QUEUED], found.estimated


def test_postgres_counts_past_the_exact_ones_are_near_the_truth_before_any_analyze(pg_url: str) -> None:
    """The planner alone, before an ANALYZE, said about 1,000 for each of two
    queues of 25,000: the estimate starts from PostgreSQL's count of live
    rows instead, and a queue whose share is small is counted exactly."""
    store = PostgresStore(pg_url)
    try:
        store.jobs_insert(jobs=[new(queue="a")])
        _copies(pg_url, "a", 24_999)
        _copies(pg_url, "b", 25_000)
        _copies(pg_url, "c", 3_000)
        with psycopg.connect(pg_url) as conn:  # as a fresh database is: never analyzed
            assert conn.execute("SELECT last_analyze, last_autoanalyze FROM pg_stat_user_tables "
                                "WHERE relname = 'redrive_job'").fetchone() == (None, None)
        (a, a_estimated), (b, _), (c, _) = (_waiting(store, q) for q in "abc")
        assert a_estimated and 25_000 / 2 <= a <= 25_000 * 2 and 25_000 / 2 <= b <= 25_000 * 2, (a, b)
        assert 0.9 * 25_000 <= a <= 1.1 * 25_000, a  # (and in fact close: PostgreSQL's own count)
        assert c == 3_000  # its share was small: counted, exactly
        # Past the last exact count and the shares, never below what was counted
        _copies(pg_url, "d", COUNTED_UP_TO + 5_000)
        d, d_estimated = _waiting(store, "d")
        assert d_estimated and COUNTED_UP_TO <= d <= 2 * (COUNTED_UP_TO + 5_000), d
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_queue_depth_alert_fires_at_the_first_job_past_its_threshold_and_resolves_when_drained(
        backend: str, tmp_path, request) -> None:
    """The matchmaking design's own threshold: queue depth over 1,000. Past
    1,000 waiting jobs the pages estimate; the rule decides on exact counts."""
    app = App(request.getfixturevalue("pg_url") if backend == "postgres" else f"sqlite:///{tmp_path / 'r.db'}")
    app.task(name="t")(_noop)
    app.alert(QueueDepth("deep", above=1_000))
    evaluator = AlertEvaluator(app)
    try:
        store = app.store
        store.jobs_insert(jobs=[new(queue="matchmaking") for _ in range(1_000)])
        assert evaluator.evaluate() == [] and store.alerts_firing() == {}
        store.jobs_insert(jobs=[new(queue="matchmaking")])  # the 1,001st
        (fired,) = evaluator.evaluate()
        assert fired.state == "firing" and "holds 1001 queued jobs" in fired.detail, fired
        while claim(store, 500, queues=["matchmaking"]):
            pass  # all running now: none queued
        (resolved,) = evaluator.evaluate()
        assert resolved.state == "resolved" and store.alerts_firing() == {}
    finally:
        app.close()


def _noop(*args: object) -> None:
    """The task the rows name: these tests run none."""
