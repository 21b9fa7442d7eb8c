"""Atomic write phases (seed 000 §4): a task's result writes (clear old rows,
insert new ones, update assignments) as one transaction on the application's
own connection, so a failure at any step leaves the previous state intact.

Inside a running job the phase is also fenced on the job's lease: a worker
that lost its lease (paused, partitioned) rolls back instead of committing
over the work of the worker that took the job over. When the connection is to
the database redrive itself uses, the lease is checked inside the transaction
and stays locked until the commit; otherwise it is checked just before it.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Any, Iterator

import psycopg

from redrive.errors import ConfigError, LeaseLost
from redrive.runtime.context import _current, _Run


@contextmanager
def write_phase(conn: Any) -> Iterator[Any]:
    """``with redrive.write_phase(conn):`` run the block's writes on ``conn``
    (psycopg 3 or sqlite3) in one transaction: committed when the block ends,
    rolled back if it raises or if the running job's lease is gone."""
    if isinstance(conn, psycopg.Connection):
        with _postgres(conn):
            yield conn
    elif isinstance(conn, sqlite3.Connection):
        with _sqlite(conn):
            yield conn
    else:
        raise ConfigError("write_phase takes a psycopg (3) or sqlite3 connection")


@contextmanager
def _postgres(conn: psycopg.Connection) -> Iterator[None]:
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise ConfigError("write_phase needs a connection with no transaction open")
    run = _current.get()
    with conn.transaction():
        yield
        if run is not None:
            shared = conn.execute("SELECT to_regclass('redrive_job') IS NOT NULL").fetchone()[0]
            if shared:
                held = conn.execute(
                    "SELECT 1 FROM redrive_job WHERE id = %s AND lease_token = %s FOR SHARE",
                    (run.job.id, run.job.lease_token)).fetchone()
                _check(run, held is not None)
            else:
                _check(run, _held_in_store(run))


@contextmanager
def _sqlite(conn: sqlite3.Connection) -> Iterator[None]:
    if conn.in_transaction:
        raise ConfigError("write_phase needs a connection with no transaction open")
    run = _current.get()
    # IMMEDIATE: the write lock is taken now, so the lease check below and the
    # commit see the same database (no other process can write in between).
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        if run is not None:
            shared = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'redrive_job'").fetchone()
            if shared:
                held = conn.execute("SELECT 1 FROM redrive_job WHERE id = ? AND lease_token = ?",
                                    (str(run.job.id), run.job.lease_token.hex)).fetchone()
                _check(run, held is not None)
            else:
                _check(run, _held_in_store(run))
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def _held_in_store(run: _Run) -> bool:
    job = run.store.job_get(job_id=run.job.id)
    return job is not None and job.lease_token == run.job.lease_token


def _check(run: _Run, held: bool) -> None:
    if not held:
        raise LeaseLost(f"job {run.job.id} lost its lease: its write phase was rolled back")
