"""The connection of a transaction you hold, as redrive's stores take it.

``enqueue(..., conn=...)`` joins your transaction: the job exists if and
only if it commits. ``conn`` is a psycopg 3 or sqlite3 connection, or what
your library holds one in:

- a SQLAlchemy ``Session`` or ``Connection`` (sync, with the ``psycopg`` or
  ``pysqlite`` driver): the connection of its transaction;
- Django's ``connection`` (or ``connections[alias]``) inside
  ``transaction.atomic()``.

``enqueue_async(..., conn=...)`` joins an asynchronous transaction on
PostgreSQL: a psycopg ``AsyncConnection``, or a SQLAlchemy ``AsyncSession``
or ``AsyncConnection`` (``postgresql+psycopg``) holding one.

Neither library is imported here: each is known by its types' module.
"""

from __future__ import annotations

from typing import Any

from redrive.errors import ConfigError


def driver_connection(conn: Any) -> Any:
    """The DB-API connection under ``conn``: ``conn`` itself when it is one."""
    module = type(conn).__module__
    if module.startswith("sqlalchemy."):
        if callable(getattr(conn, "connection", None)):  # a Session: the Connection its transaction uses
            conn = conn.connection()
        elif not conn.in_transaction():
            # begun where SQLAlchemy sees it: else its commit() would not know
            # there was anything to commit, and the job would be lost with the connection
            conn.begin()
        return conn.connection.driver_connection
    if module.startswith("django.") and hasattr(conn, "in_atomic_block"):
        if not conn.in_atomic_block:
            # in autocommit each statement commits alone: the job would exist whatever the caller's code did next
            raise ConfigError("a Django connection joins a transaction only inside transaction.atomic()")
        conn.ensure_connection()
        return conn.connection
    return conn


async def driver_connection_async(conn: Any) -> Any:
    """The driver's asynchronous connection under ``conn``: ``conn`` itself when it is one."""
    if type(conn).__module__.startswith("sqlalchemy."):
        if callable(getattr(conn, "get_raw_connection", None)):  # an AsyncConnection
            if not conn.in_transaction():
                await conn.begin()  # as for a sync Connection: its commit() must know of the job
        else:  # an AsyncSession: the AsyncConnection its transaction uses
            conn = await conn.connection()
        return (await conn.get_raw_connection()).driver_connection
    return conn
