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


def test_the_plan_of_a_batch_of_successes_searches_the_primary_key_on_a_table_of_hundreds(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        store.jobs_insert(jobs=[new() for _ in range(500)])
        names = ("ids", "tokens", "ns", "dur_ms", "wait_ms", "reclaims", "results", "metas")
        sql = store._queries["jobs_finish"].replace("%(others)s", "'[]'")
        for n, name in enumerate(names, 1):
            sql = re.sub(rf"%\({name}\)[sb]", f"${n}", sql)
        sql = sql.replace("%%", "%")
        with store._connection() as conn, conn.transaction():
            conn.execute("ANALYZE redrive_job")
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            conn.execute(f"PREPARE complete_plan (uuid[], uuid[], text, text, text, text, jsonb, jsonb) "
                         f"AS {sql.strip().rstrip(';')}")
            one = f"ARRAY['{'0' * 32}']::uuid[]"
            plan = "\n".join(row["QUERY PLAN"] for row in conn.execute(
                f"EXPLAIN EXECUTE complete_plan({one}, {one}, '0', '1', '', NULL, NULL, NULL)"))
            conn.execute("DEALLOCATE complete_plan")
        deleting = plan[plan.index("Delete on redrive_job j"):plan.index("CTE done")]
        assert "redrive_job_pkey" in deleting, plan
        assert not re.search(r"Seq Scan on redrive_job j\b", deleting), plan
    finally:
        store.close()


def test_the_plan_of_what_follows_a_batch_looks_each_step_up_by_its_index(pg_url: str) -> None:
    """``jobs_ended`` settles the workflow steps among a batch's jobs: its
    plan, made generic on a table of a thousand steps, must still find each
    job's step (and result waiter) through an index, not by reading the
    table for every batch (what a join on the jobs' list alone, planned as
    a hundred rows, was)."""
    store = PostgresStore(pg_url)
    try:
        store.workflow_insert(workflow=flow({"part": [], "join": [("part", "succeeded")]}, fan={"part": 1000})[0])
        names = ("queues", "tasks", "kinds", "buckets", "ns", "ids", "statuses")
        sql = store._queries["jobs_ended"]
        for n, name in enumerate(names, 1):
            sql = re.sub(rf"%\({name}\)[sb]", f"${n}", sql)
        sql = sql.replace("%%", "%")
        with store._connection() as conn, conn.transaction():
            conn.execute("ANALYZE redrive_step")
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            conn.execute(f"PREPARE ended_plan (text[], text[], text[], int[], int[], uuid[], text[]) "
                         f"AS {sql.strip().rstrip(';')}")
            plan = "\n".join(row["QUERY PLAN"] for row in conn.execute(
                f"EXPLAIN EXECUTE ended_plan('{{}}', '{{}}', '{{}}', '{{}}', '{{}}', "
                f"ARRAY['{'0' * 32}']::uuid[], ARRAY['succeeded'])"))
            conn.execute("DEALLOCATE ended_plan")
        assert not re.search(r"Seq Scan on redrive_(step|result_waiter)\b", plan), plan
        assert "redrive_step" in plan and "redrive_result_waiter" in plan, plan
    finally:
        store.close()
