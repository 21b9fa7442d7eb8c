"""Who acts on the operator API, and every rule of who may do what:

- an **operator** may do everything;
- a **read-only operator** (a viewer) sees what an operator sees and acts on nothing;
- an **owner** (a user whose jobs carry their ``owner``) may read, retry and
  cancel their own jobs, and nothing of anyone else's: another owner's job
  answers ``Forbidden``, with no data of it;
- dead letters, breakers, the outbox and pruning are for operators only.

``Acting`` holds the store and these rules; each subject of the operator API
(jobs, dead letters, controls) builds on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from redrive.core.job import Job
from redrive.declarations import Registry
from redrive.errors import ConfigError, Forbidden
from redrive.store.operations import FullStore
from redrive.stream import EventStream


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is acting: an operator, a read-only operator (who sees what an
    operator sees and acts on nothing), or someone acting for one ``owner``.
    ``name`` goes into the audit trail (events, notes, breaker history)."""

    name: str
    owner: str | None = None  # None: an operator
    read_only: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError("an actor needs a name for the audit trail")
        if self.owner is not None and (not isinstance(self.owner, str) or not self.owner):
            raise ConfigError("an owner is a non-empty string")
        if self.read_only and self.owner is not None:
            raise ConfigError("a read-only actor is an operator who acts on nothing, not an owner")

    @classmethod
    def operator(cls, name: str) -> Actor:
        return cls(name=name)

    @classmethod
    def viewer(cls, name: str) -> Actor:
        """A read-only operator: every page and list, no action."""
        return cls(name=name, read_only=True)

    @classmethod
    def acting_for(cls, owner: str, *, name: str | None = None) -> Actor:
        """An owner acting on their own jobs (``name`` defaults to ``owner:<owner>``)."""
        return cls(name=name or f"owner:{owner}", owner=owner)

    @property
    def is_operator(self) -> bool:
        return self.owner is None


class Acting:
    """Operator actions on one store, as ``actor``."""

    def __init__(self, store: FullStore, *, actor: Actor, registry: Registry | None = None,
                 events: EventStream | None = None) -> None:
        if not isinstance(actor, Actor):
            raise ConfigError("Admin acts as an Actor: Actor.operator(name) or Actor.acting_for(owner)")
        self.store = store
        self.actor = actor
        self.registry = registry
        self.events = events or EventStream()
        self._owns_store = False

    # -- the rules -------------------------------------------------------------

    def _operator_only(self, what: str) -> None:
        if not self.actor.is_operator:
            raise Forbidden(f"only an operator may {what}")

    def _acting(self, what: str, *, operator: bool = True) -> None:
        """A change: refused to a read-only operator, and (``operator``) to owners."""
        if operator:
            self._operator_only(what)
        if self.actor.read_only:
            raise Forbidden(f"a read-only operator may not {what}")

    def _may_touch(self, job: Job) -> Job:
        if not self.actor.is_operator and job.owner != self.actor.owner:
            raise Forbidden(f"job {job.id} belongs to someone else; only its owner or an operator may act on it")
        return job

