"""SQLiteStore: the embedded default, one file shared by worker processes on one machine.

Writes run in ``BEGIN IMMEDIATE`` transactions so a writer takes the lock up
front (a deferred transaction that upgrades can fail at once with "database is
locked", which the busy timeout does not cover); a transaction that still finds
the file locked is retried from the start, and only after a long deadline does
a caller see ``StoreBusy``.

The store is the package's parts in one class, along its roles: reaching
the file (``connection``), enqueueing (``enqueue``), every state change
after the enqueue (``endings``), the runtime's other calls (``work``), an
operator's actions (``operations``), the read side (``reads``), workflows
(``workflows``, their edges in ``edges``) and hearing other processes'
commits (``watch``); ``codecs`` turns rows into redrive's
values.
"""

from __future__ import annotations

from redrive.store.sqlite.workflows import Workflows

__all__ = ["SQLiteStore"]


class SQLiteStore(Workflows):
    """A store on one SQLite file (``sqlite:///path``)."""
