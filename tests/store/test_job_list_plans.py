"""The jobs list is written once for both SQL stores (store/shared.sql);
PostgreSQL must still plan it onto its indexes: newest first from the live
table's and the history's (created_at, id) indexes (the running jobs, which
the live one leaves out, through the lease's), and a filter on failed jobs
from the partial index of failed and cancelled history, never a sort of
every waiting or finished job (the dialects spell the status list
differently for this)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from redrive.store.postgres.store import PostgresStore

_NONE = dict.fromkeys(("statuses", "queue", "task", "owner", "error_code", "idempotency_key", "created_after",
                       "created_before", "after_at", "after_id"), None)


@pytest.mark.parametrize(("where", "tables", "indexes"), [
    # running jobs are not in the live table's index (migration 0035): read through the lease's
    ({}, {"live": True, "done": True}, ("redrive_job_created", "redrive_job_done_created")),
    ({"statuses": ["failed"]}, {"live": False, "done": True}, ("redrive_job_done_unsucceeded",)),
    ({"after_at": datetime.now(UTC), "after_id": str(uuid4()), "task": "t"}, {"live": True, "done": True},
     ("redrive_job_created", "redrive_job_done_created")),
], ids=["newest first", "failed", "a later page by task"])
def test_postgres_plans_the_shared_jobs_list_onto_its_indexes(pg_url: str, where, tables, indexes) -> None:
    store = PostgresStore(pg_url)
    try:
        with store._connection() as conn, conn.transaction():
            # an empty table: ask whether an index can give the rows in the page's order
            for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                conn.execute(f"SET LOCAL {setting} = off")
            plan = "\n".join(r["QUERY PLAN"] for r in conn.execute(
                "EXPLAIN " + store._queries["jobs_page"], _NONE | where | tables | {"limit": 51}))
        for index in indexes:
            assert f"Index Scan Backward using {index} " in plan, plan
        if tables["live"]:
            assert "Index Scan Backward using redrive_job_running " in plan, plan  # a page of them, in order
        assert "Seq Scan" not in plan and "Bitmap" not in plan, plan
    finally:
        store.close()


# Every index of the job tables and of their events, and a read that needs it
# (besides the jobs list above): one written per job and per state change must
# earn its bytes of WAL (bench/run dbcost). An index added without a read here
# fails the last test.
_DUE = ("SELECT j.id FROM redrive_job AS j WHERE j.status IN ('scheduled', 'queued') AND j.run_at <= now() "
        "AND j.queue = ANY(%(queues)s) ORDER BY j.priority, j.run_at LIMIT 10 FOR UPDATE SKIP LOCKED")
NEEDED = {
    "redrive_job_pkey": ("job_get", {"id": uuid4()}),
    "redrive_job_done_pkey": ("job_get", {"id": uuid4()}),
    "redrive_job_due": (_DUE, {"queues": ["default"]}),  # the claim's pick (redrive_pick, migrations 0026, 0042)
    "redrive_job_waiting": ("queues_count", {"queues": ["default"], "statuses": ["queued"], "cap": 1000}),
    "redrive_job_running": ("jobs_expired", {"limit": 100}),  # each running job, its lease read in the row
    "redrive_job_done_finished_at": ("runs_ended", {"since": datetime.now(UTC), "limit": 100}),
    "redrive_job_event_pkey": ("job_events_list", {"id": uuid4()}),
}
LISTED = {"redrive_job_created", "redrive_job_done_created", "redrive_job_done_unsucceeded"}  # the test above


@pytest.mark.parametrize("index", list(NEEDED))
def test_postgres_reads_each_index_of_the_job_tables(pg_url: str, index: str) -> None:
    query, params = NEEDED[index]
    store = PostgresStore(pg_url)
    try:
        with store._connection() as conn, conn.transaction():
            for setting in ("enable_seqscan", "enable_sort"):  # an empty table: could an index answer it?
                conn.execute(f"SET LOCAL {setting} = off")
            plan = "\n".join(r["QUERY PLAN"] for r in conn.execute(
                "EXPLAIN " + store._queries.get(query, query), params))
        assert f" {index} " in plan + " ", plan
    finally:
        store.close()


def test_every_index_of_the_job_tables_is_read_by_something(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        with store._connection() as conn:
            found = {r["indexname"] for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename IN "
                "('redrive_job', 'redrive_job_done', 'redrive_job_event')")}
    finally:
        store.close()
    assert found == NEEDED.keys() | LISTED
