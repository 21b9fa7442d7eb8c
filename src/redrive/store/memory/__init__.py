"""The in-memory reference store: the semantics of the Store protocol in plain
Python, for redrive's own suite and for users' tests. Single process only.

Its parts, along the roles of every store: the state and one job read
(``state``), every state change after the enqueue (``endings``), the
runtime's other calls (``work``), an operator's actions (``operations``)
the read side (``reads``) and workflows (``workflows``)."""

from __future__ import annotations

from redrive.store.memory.workflows import Workflows

__all__ = ["MemoryStore"]


class MemoryStore(Workflows):
    """Every table of a database in dicts: the store's behaviour with no database."""
