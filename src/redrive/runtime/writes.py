"""Atomic write phases (the matching system's §4): a task's result writes
(clear old rows, insert new ones, update assignments) as one transaction on
the application's own connection, so a failure at any step leaves the
previous state intact.

Inside a running job the phase is also fenced on the job's lease: a worker
that lost its lease (paused, partitioned) rolls back instead of committing
over the work of the worker that took the job over. The store checks the
lease (``lease_check``): inside the caller's transaction, locked until the
commit, when the connection is to the database redrive itself uses; just
before the commit otherwise.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from redrive.errors import ConfigError, LeaseLost
from redrive.runtime.context import CURRENT_RUN, HandlerRun


@contextmanager
def write_phase(conn: Any) -> Iterator[Any]:
    """``with redrive.write_phase(conn):`` run the block's writes on ``conn``
    (psycopg 3 or sqlite3) in one transaction: committed when the block ends,
    rolled back if it raises or if the running job's lease is gone."""
    # By the class's module, so that using SQLite never imports psycopg.
    if type(conn).__module__.startswith("psycopg"):
        with _postgres(conn):
            yield conn
    elif isinstance(conn, sqlite3.Connection):
        with _sqlite(conn):
            yield conn
    else:
        raise ConfigError("write_phase takes a psycopg (3) or sqlite3 connection")


@contextmanager
def _postgres(conn: Any) -> Iterator[None]:
    from psycopg.pq import TransactionStatus

    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise ConfigError("write_phase needs a connection with no transaction open")
    run = CURRENT_RUN.get()
    with conn.transaction():
        yield
        if run is not None:
            _check(run, conn)


@contextmanager
def _sqlite(conn: sqlite3.Connection) -> Iterator[None]:
    if conn.in_transaction:
        raise ConfigError("write_phase needs a connection with no transaction open")
    run = CURRENT_RUN.get()
    # IMMEDIATE: the write lock is taken now, so the lease check below and the
    # commit see the same database (no other process can write in between).
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        if run is not None:
            _check(run, conn)
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def _check(run: HandlerRun, conn: Any) -> None:
    if not run.store.lease_check(lease=run.job.lease, conn=conn):
        raise LeaseLost(f"job {run.job.id} lost its lease: its write phase was rolled back")
