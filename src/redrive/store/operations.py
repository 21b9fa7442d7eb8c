"""What an operator or a service asks of a store, beside the runtime's hot
path (``port.Store``) and the read side (``reads.Reads``): cancelling,
deleting and reviving jobs, pausing queues and schedules, dead letters'
notes and resolutions, alerts' state, the audit trail and the dashboard's
sessions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

from redrive.core.dead_letters import Revival
from redrive.core.job import DeadLetter, Job
from redrive.store.port import Store
from redrive.store.reads import AuditEntry, Reads
from redrive.store.workflows import Workflows


class Operations(Protocol):
    def jobs_delete(self, *, job_ids: Sequence[UUID]) -> list[UUID]:
        """Delete the finished jobs among ``job_ids`` now, as a prune would
        (events, dead letters, keys), an open dead letter included: an
        operator chose them. Returns the ids that went; a job still active,
        or gone already, is left out."""

    def jobs_cancel(self, *, job_ids: Sequence[UUID], by: str) -> list[Job | None]:
        """Each job, in one write: scheduled or queued -> cancelled at once
        (the event says ``by``); a running one is returned still running,
        with the request recorded: its worker stops it (``control_read``)
        and ends it with a ``Cancellation``. Asking again changes nothing.
        In the order asked; None for a job that is not there or has ended."""

    def queue_pause(self, *, queue: str, by: str) -> bool:
        """No worker claims from ``queue`` until it is resumed. False when it was paused already."""

    def queue_resume(self, *, queue: str) -> bool:
        """False when it was not paused."""

    def jobs_revive(self, *, revivals: Sequence[Revival]) -> list[Job | None]:
        """failed -> queued for each of ``revivals`` (each job at most once)
        as its plan says (``core.dead_letters.revive_plan``), in one
        transaction: fresh attempts, its stage, counts and saved outputs; the
        job's open dead letters are marked replayed. In order, the job queued
        again, or None when the job is no longer the failure the plan was made
        from (``plan.failed_at``) or the revival's ``dead_letter_id`` is no
        longer open: two operators acting at once revive it once. A cancel
        request left from its last run is dropped."""

    def dead_letter_note(self, *, id: int, text: str, by: str | None) -> DeadLetter:
        """Append a resolution note."""

    def dead_letters_resolve(self, *, ids: Sequence[int], by: str | None, note: str | None = None) -> list[DeadLetter]:
        """Close the open letters among ``ids`` without a replay, with ``note``
        appended when given, in one write. Returns the letters it closed; one
        replayed or resolved already (or gone) is left alone, so two operators
        acting at once close it once."""

    def schedule_pause(self, *, name: str, by: str, now: datetime) -> bool:
        """Schedulers skip ``name``'s firings until it is resumed (one seen
        for the first time is created paused at ``now``). False when it was
        paused already."""

    def schedule_resume(self, *, name: str) -> bool:
        """``name`` fires again from its next time; what it skipped while
        paused stays skipped. False when it was not paused."""

    def alert_fire(self, *, rule: str, incident: str, detail: str) -> bool:
        """``rule`` starts firing as ``incident``. False when it was firing
        already: another evaluator (or this one before a restart) told it."""

    def alert_resolve(self, *, rule: str, incident: str) -> bool:
        """``incident`` of ``rule`` ends. False when it was not the one firing."""

    def audit_record(self, *, by: str, action: str, job_id: UUID | None = None,
                     detail: dict[str, Any] | None = None) -> AuditEntry:
        """Put an operator's action on record (at the database's clock)."""

    def session_open(self, *, id: str, principal: str, ttl: timedelta) -> None:
        """Keep a dashboard session ``id`` for ``principal`` (both opaque
        digests) until ``ttl`` from now, at the database's clock; sessions
        past their time are forgotten."""

    def session_read(self, *, id: str) -> str | None:
        """The principal of session ``id`` while it lasts; None once it has
        expired or been closed, or if it never was."""

    def session_close(self, *, id: str) -> None:
        """End session ``id`` now (a logout)."""


class FullStore(Store, Operations, Reads, Workflows, Protocol):
    """A whole store, as the operator API and the testing kit use it: the
    runtime's hot path, the operations, the read side and workflows (every
    store of redrive's is one)."""
