"""PostgresStore: many workers on many machines, through psycopg 3 and a pool.

Every operation is one SQL statement on an autocommit connection, so it is
atomic and costs one round trip; a keyed or big enqueue is the exception
(docs/storage.md). Claims use FOR UPDATE SKIP LOCKED; enqueue and
requeue send a NOTIFY that idle workers LISTEN for (a hint: workers also poll).

The store is the package's parts in one class, along its roles: reaching
the database (``connection``), enqueueing (``enqueue``), the runtime's other
calls (``work``), every state change after the enqueue (``endings``), an
operator's actions (``operations``), the read side (``reads``),
LISTEN/NOTIFY (``listen``) and workflows (``workflows``); ``codecs`` turns rows into redrive's values.
"""

from __future__ import annotations

from redrive.store.postgres.connection import DEFAULT_DEADLINE
from redrive.store.postgres.workflows import Workflows

__all__ = ["DEFAULT_DEADLINE", "PostgresStore"]


class PostgresStore(Workflows):
    """A store on one PostgreSQL database (``postgresql://...``)."""
