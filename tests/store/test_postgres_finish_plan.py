"""A worker keeps the plan of its batch of endings (``jobs_finish``, whose
own part writes the successes) for as long as its connection lives, and PostgreSQL may make that plan generic
while the job table holds a few hundred jobs. Such a plan must still find
each job through the primary key, not scan the table, or every batch scans
all that the table has grown to since. (Below that, a scan is what the
ending statement of every kind is planned to as well.)"""

from __future__ import annotations

import re

from redrive.store.postgres.store import PostgresStore
from redrive.testing import new
from redrive.testing.suite.workflows import flow


def _generic_plan(store: PostgresStore, sql: str, table: str, params: dict[str, tuple[str, str]]) -> str:
    """The plan PostgreSQL keeps for ``sql`` once it makes it generic, on
    ``table`` as analyzed now: ``params`` names each placeholder's type and
    the value to explain it with, in order."""
    for n, name in enumerate(params, 1):
        sql = re.sub(rf"%\({name}\)[sb]", f"${n}", sql)
    sql = sql.replace("%%", "%").strip().rstrip(";")
    types = ", ".join(kind for kind, _ in params.values())
    values = ", ".join(value for _, value in params.values())
    with store._connection() as conn, conn.transaction():
        conn.execute(f"ANALYZE {table}")
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE kept_plan ({types}) AS {sql}")
        plan = "\n".join(row["QUERY PLAN"] for row in conn.execute(f"EXPLAIN EXECUTE kept_plan({values})"))
        conn.execute("DEALLOCATE kept_plan")
    return plan


ONE_ID = f"ARRAY['{'0' * 32}']::uuid[]"


# a batch of one success, as jobs_finish and jobs_finish_at take it
SUCCESSES = {"ids": ("uuid[]", ONE_ID), "tokens": ("uuid[]", ONE_ID), "ns": ("text", "'0'"),
             "dur_ms": ("text", "'1'"), "wait_ms": ("text", "''"), "reclaims": ("text", "NULL"),
             "results": ("jsonb", "NULL"), "metas": ("jsonb", "NULL")}


def _deleting(store: PostgresStore, name: str, **more: tuple[str, str]) -> str:
    """The part of ``name``'s generic plan, on a live table of 500 jobs, that finds the successes' rows."""
    store.jobs_insert(jobs=[new() for _ in range(500)])
    plan = _generic_plan(store, store._queries[name].replace("%(others)s", "'[]'"), "redrive_job",
                         {**SUCCESSES, **more})
    return plan[plan.index("Delete on redrive_job j"):plan.index("CTE done")]


def test_the_plan_of_a_batch_of_successes_searches_the_primary_key_on_a_table_of_hundreds(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        deleting = plan = _deleting(store, "jobs_finish")
        assert "redrive_job_pkey" in deleting, plan
        assert not re.search(r"Seq Scan on redrive_job j\b", deleting), plan
    finally:
        store.close()


def test_the_plan_of_a_batch_whose_rows_the_store_knows_reads_each_where_it_is(pg_url: str) -> None:
    """``jobs_finish_at`` (places.py): each success's row read at its ctid,
    the places' list cast once, never a scan of the table."""
    store = PostgresStore(pg_url)
    try:
        deleting = plan = _deleting(store, "jobs_finish_at", places=("text[]", "ARRAY['(0,1)']"))
        assert "Tid Scan on redrive_job j" in deleting, plan
        assert "Seq Scan" not in deleting and "redrive_job_pkey" not in deleting, plan
        assert "InitPlan" in deleting, plan  # the places cast once a statement, not at each row
    finally:
        store.close()


def test_the_plan_of_what_follows_a_batch_looks_each_step_up_by_its_index(pg_url: str) -> None:
    """``jobs_ended`` settles the workflow steps among a batch's jobs: its
    plan, made generic on a table of a thousand steps, must still find each
    job's step (and result waiter) through an index, not by reading the
    table for every batch (what a join on the jobs' list alone, planned as
    a hundred rows, was). Whether there are any steps or waiters at all is
    read first, once, at their newest entries: none, and nothing more is."""
    store = PostgresStore(pg_url)
    try:
        store.workflow_insert(workflow=flow({"part": [], "join": [("part", "succeeded")]}, fan={"part": 1000})[0])
        none = "'{}'"
        plan = _generic_plan(store, store._queries["jobs_ended"], "redrive_step", {
            "queues": ("text[]", none), "tasks": ("text[]", none), "kinds": ("text[]", none),
            "buckets": ("int[]", none), "ns": ("int[]", none), "ids": ("uuid[]", ONE_ID),
            "statuses": ("text[]", "ARRAY['succeeded']")})
        assert not re.search(r"Seq Scan on redrive_(step|result_waiter)\b", plan), plan
        assert "redrive_step" in plan and "redrive_result_waiter" in plan, plan
        # once a batch, whether any is there at all: the rest runs only if so
        assert len(re.findall(r"One-Time Filter: \(\$\d+ IS NOT NULL\)", plan)) == 2, plan
        for table in ("redrive_step", "redrive_result_waiter"):
            assert f"Index Only Scan Backward using {table}_pkey" in plan, plan
    finally:
        store.close()
