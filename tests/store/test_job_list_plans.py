"""The jobs list is written once for both SQL stores (store/shared.sql);
PostgreSQL must still plan it onto its indexes: newest first from the live
table's and the history's (created_at, id) indexes, and a filter on failed
jobs from the partial index of failed and cancelled history, never a sort of
every job (the dialects spell the status list differently for this)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from redrive.store.postgres.store import PostgresStore

_NONE = dict.fromkeys(("statuses", "queue", "task", "owner", "error_code", "idempotency_key", "created_after",
                       "created_before", "after_at", "after_id"), None)


@pytest.mark.parametrize(("where", "tables", "indexes"), [
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
        assert "Seq Scan" not in plan and "Bitmap" not in plan, plan
    finally:
        store.close()
