"""SQLite's lease check on the caller's own connection: inside their
transaction when it is redrive's database, through the store otherwise."""

from __future__ import annotations

import sqlite3

from redrive.store.sqlite.store import SQLiteStore
from redrive.testing import claim_one, new


def test_the_lease_check_on_a_callers_sqlite_connection(tmp_path) -> None:
    store = SQLiteStore(str(tmp_path / "redrive.db"))
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    # On the caller's own connection to redrive's database, inside their transaction
    conn = sqlite3.connect(store.path)
    conn.execute("BEGIN IMMEDIATE")
    assert store.lease_check(lease=job.lease, conn=conn)
    conn.rollback()
    conn.close()
    # On a connection to another database, through the store
    elsewhere = sqlite3.connect(str(tmp_path / "app.db"))
    assert store.lease_check(lease=job.lease, conn=elsewhere)
    elsewhere.close()
    store.close()
