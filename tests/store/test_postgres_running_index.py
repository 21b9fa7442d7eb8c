"""The running jobs' index under a stream of claims and endings, read from
PostgreSQL's WAL: a claim adds each job's entry and leaves the dead ones to
vacuum, never making PostgreSQL delete them by visiting the heap whenever a
page fills (jobs_claim in store/postgres/sql/claim.sql says why)."""

from __future__ import annotations

import re
from collections import Counter

import psycopg
import pytest

from redrive.core.transitions import Completion
from redrive.store.postgres.store import PostgresStore
from redrive.testing import claim, new

pytestmark = pytest.mark.postgres


def _records(conn: psycopg.Connection, index: str, start: str) -> Counter:
    """The kinds of the WAL records written to ``index`` since ``start``."""
    node, db = conn.execute("SELECT pg_relation_filenode(%s), (SELECT oid FROM pg_database "
                            "WHERE datname = current_database())", [index]).fetchone()
    mine = re.compile(rf"\brel \d+/{db}/{node}\b")
    rows = conn.execute("SELECT record_type, block_ref FROM pg_get_wal_records_info(%s, pg_current_wal_flush_lsn()) "
                        "WHERE resource_manager = 'Btree'", [start]).fetchall()
    return Counter(kind for kind, blocks in rows if blocks and mine.search(blocks))


def test_claims_add_running_entries_and_leave_the_dead_ones_to_vacuum(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        for _ in range(4):  # written by COPY: a batch's jobs share one created_at, the index's key
            store.jobs_insert(jobs=[new() for _ in range(1000)])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            [start] = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
            ended = 0
            while jobs := claim(store, 450):  # as a worker: claim a batch, end it, claim the next
                ended += len(store.jobs_finish([Completion(job.lease, None) for job in jobs]))
            kinds = _records(conn, "redrive_job_running", start)
    finally:
        store.close()
    assert ended == 4000
    assert kinds["INSERT_LEAF"] + kinds["INSERT_POST"] >= 3900, kinds  # each claim's entry (a page's first goes in a split)
    assert kinds["DELETE"] == 0, kinds  # what a bottom-up deletion writes
