"""The operator API: what a person or a service may do to jobs, dead letters
and breakers, acting as one principal.

Every authorization rule lives in ``actor`` (who may do what), so the CLI,
the HTTP API and the dashboard cannot disagree; each subject is a module of
its own (``jobs``, ``workflows``, ``dead_letters``, ``controls``) and
``Admin`` is all of them. Every action records who did it (``Actor.name``) in the job's events,
the dead letter, the breaker's history or the audit trail.
"""

from __future__ import annotations

from types import TracebackType

from redrive.admin.actor import Actor
from redrive.admin.controls import Controls
from redrive.admin.dead_letters import DeadLetterActions
from redrive.admin.results import BULK_ACTIONS, BreakerStatus, Bulk, Replay, Resolve
from redrive.admin.workflows import WorkflowActions
from redrive.declarations import Registry
from redrive.settings import Settings
from redrive.store.url import open_store

__all__ = ["BULK_ACTIONS", "Actor", "Admin", "BreakerStatus", "Bulk", "Replay", "Resolve"]


class Admin(WorkflowActions, DeadLetterActions, Controls):
    """Operator actions on one store, as ``actor``. Works from a database
    alone (``Admin.open(url, actor=...)``); with the application's ``registry``
    it also knows declared dependencies not used yet and each task's first
    stage (a replay from the start then shows where it resumes)."""

    @classmethod
    def open(cls, database_url: str, *, actor: Actor, registry: Registry | None = None,
             settings: Settings | None = None) -> Admin:
        """An admin on its own store, closed with it; ``settings``: how to
        reach PostgreSQL (``store_timeout``, ``database_pool_mode``, ``listen_url``)."""
        admin = cls(open_store(database_url, must_exist=True, settings=settings), actor=actor, registry=registry)
        admin._owns_store = True
        return admin

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
