"""What one parent's ending costs does not grow with its siblings: in a
fan-in of 10 and of 1,000, ending one member (and the last, which releases
the join) runs the same statements on SQLite and touches the same rows on
PostgreSQL (counted in the ending's own transaction), never scanning the
step or edge tables."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from psycopg.rows import tuple_row

from redrive.core.transitions import Completion
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SQLiteStore
from redrive.testing import claim
from redrive.testing.suite.workflows import flow
from tests.figures import record

TABLES = ("redrive_job", "redrive_step", "redrive_edge")


def _fan_in(store: Any, n: int) -> list:
    """A fan-in of ``n`` members and its join, every member claimed and all
    but two ended: the two left are the ending measured (a middle one, then
    the last, which releases the join)."""
    wf, _ = flow({"part": [], "join": [("part", "succeeded")]}, fan={"part": n})
    store.workflow_insert(workflow=wf)
    held = []
    while len(held) < n:
        held += claim(store, 500)
    store.jobs_finish([Completion(job.lease, None) for job in held[2:]])
    return held[:2]


def _sqlite_statements(store: SQLiteStore, job: Any) -> Counter[str]:
    seen: Counter[str] = Counter()
    store._conn.set_trace_callback(lambda sql: seen.update([" ".join(sql.split())[:60]]))
    try:
        store.jobs_finish([Completion(job.lease, None)])
    finally:
        store._conn.set_trace_callback(None)
    return seen


def test_an_ending_runs_the_same_statements_whatever_the_fan_in_on_sqlite(tmp_path) -> None:
    counted = {}
    for n in (10, 1000):
        store = SQLiteStore(str(tmp_path / f"{n}.db"))
        middle, last = _fan_in(store, n)
        counted[n] = (_sqlite_statements(store, middle), _sqlite_statements(store, last))
        store.close()
    assert counted[10] == counted[1000]
    record("workflow ending cost (sqlite)", "statements, a member / the last member",
           f"{sum(counted[1000][0].values())} / {sum(counted[1000][1].values())} at 1,000 siblings",
           f"the same at 10: {sum(counted[10][0].values())} / {sum(counted[10][1].values())}")


_COUNTS = ("SELECT relname, seq_scan, coalesce(idx_scan, 0), n_tup_ins, n_tup_upd, n_tup_del "
           "FROM pg_stat_xact_user_tables WHERE relname = ANY(%s)")


def _pg_rows(store: PostgresStore, job: Any) -> dict[str, tuple[int, ...]]:
    """The scans and rows of the ending's statements, table by table: what
    the backend counted across them, in their transaction (its counts not
    yet reported include earlier transactions', so the difference)."""
    with store._connection() as conn, conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
        before = {row[0]: row[1:] for row in cur.execute(_COUNTS, [list(TABLES)]).fetchall()}
        assert len(store._finish_batch([Completion(job.lease, None)], conn)) == 1
        after = {row[0]: row[1:] for row in cur.execute(_COUNTS, [list(TABLES)]).fetchall()}
    return {table: tuple(a - b for a, b in zip(after[table], before[table], strict=True)) for table in TABLES}


@pytest.mark.postgres
def test_an_ending_touches_the_same_rows_whatever_the_fan_in_on_postgresql(pg_url: str) -> None:
    touched = {}
    for n in (10, 1000):
        store = PostgresStore(pg_url)
        try:
            middle, last = _fan_in(store, n)
            touched[n] = (_pg_rows(store, middle), _pg_rows(store, last))
        finally:
            with store._connection() as conn:
                for table in (*TABLES, "redrive_job_done", "redrive_job_event", "redrive_workflow"):
                    conn.execute(f"DELETE FROM {table}")
            store.close()
    # the rows inserted, updated and deleted, table by table, are the same
    assert [{t: c[2:] for t, c in e.items()} for e in touched[10]] == \
        [{t: c[2:] for t, c in e.items()} for e in touched[1000]]
    for ending in touched[1000]:  # no sequential scan (on 10 rows the planner may scan the job table: harmless)
        assert all(counts[0] == 0 for counts in ending.values()), ending
    for ending in touched[10]:
        assert ending["redrive_step"][0] == ending["redrive_edge"][0] == 0, ending
    record("workflow ending cost (postgres)", "rows changed in step and edge tables, a member / the last",
           f"{sum(touched[1000][0]['redrive_step'][2:]) + sum(touched[1000][0]['redrive_edge'][2:])} / "
           f"{sum(touched[1000][1]['redrive_step'][2:]) + sum(touched[1000][1]['redrive_edge'][2:])}",
           "the same at 10 siblings and at 1,000")
