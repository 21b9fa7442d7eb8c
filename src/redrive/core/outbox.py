"""The outbox: one row per intended side effect, and the order in which a
delivery may touch the provider (review notifications spec §6.4, §8).

A row is keyed by the application's tuple (changelist, recipient, version).
Sending is always: mark the row ``sending``, call the provider with a token
derived from the key, then record the provider's id and ``notified_at`` in
one write. Anything that finds a send that may have happened (``sending``, or
a provider id without ``notified_at``) asks the provider before sending again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from uuid import UUID


class OutboxStatus(StrEnum):
    PENDING = "pending"  # nothing sent yet
    SENDING = "sending"  # a send started: it may or may not have reached the provider
    SENT = "sent"
    FAILED = "failed"  # the provider refused for good: an operator decides


class Step(StrEnum):
    SKIP = "skip"  # delivered, with the provider's id
    RECONCILE = "reconcile"  # a send may have happened: look it up before sending
    RECONCILE_MARKED = "reconcile_marked"  # marked sent without provider evidence (§8.3)
    SEND = "send"


@dataclass(frozen=True, slots=True)
class OutboxRow:
    key: str  # the canonical JSON of the key tuple
    token: str  # the provider idempotency token
    status: OutboxStatus
    provider_id: str | None
    notified_at: datetime | None
    job_id: UUID  # the job that wrote the row last
    sends: int  # sends started
    reconciliations: int  # provider lookups made before deciding
    error_code: str | None
    error_message: str | None
    created_at: datetime
    updated_at: datetime


OUTBOX_COLUMNS = tuple(OutboxRow.__dataclass_fields__)


def next_step(row: OutboxRow) -> Step:
    """What a delivery does with the row it has just re-read."""
    if row.notified_at is not None:
        return Step.SKIP if row.provider_id is not None else Step.RECONCILE_MARKED
    if row.provider_id is not None or row.status is OutboxStatus.SENDING:
        return Step.RECONCILE
    return Step.SEND  # pending, or failed and being tried again after a replay


@dataclass(frozen=True, slots=True)
class OutboxChange:
    """One fenced write to a row. ``notified``: True sets ``notified_at`` to the
    database's now, False clears it, None keeps it. ``provider_id`` "" clears."""

    status: OutboxStatus
    provider_id: str | None = None
    notified: bool | None = None
    error_code: str | None = None
    error_message: str | None = None
    send_started: bool = False
    reconciled: bool = False
