"""Deliveries that happen once: the outbox sender a task calls.

    redrive.deliver([Intent(key=(changelist, recipient, version),
                            send=lambda token: provider.send(..., idempotency_key=token),
                            lookup=lambda token, provider_id: provider.find(token))])

Each intent's row is re-read first; a delivered row is skipped; a row whose
send may have happened is reconciled through ``lookup`` before any resend;
otherwise the row is marked ``sending``, the provider is called with a token
derived from the key, and the provider's id and ``notified_at`` are recorded
in one write. Every write is fenced on the job's lease.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from redrive.core.ids import canonical, outbox_token
from redrive.core.job import JSON
from redrive.core.outbox import OutboxChange, OutboxRow, OutboxStatus, Step, next_step
from redrive.core.redact import redact_text
from redrive.errors import ConfigError, LeaseLost, NotDelivered
from redrive.runtime.context import HandlerRun, handler_run

log = logging.getLogger("redrive.outbox")


@dataclass(frozen=True, slots=True)
class Intent:
    """One side effect to apply once. ``send(token)`` calls the provider with
    the idempotency token and returns its message id; ``lookup(token,
    provider_id)`` returns the provider's id when it has the delivery, else None."""

    key: tuple[JSON, ...]
    send: Callable[[str], str]
    lookup: Callable[[str, str | None], str | None]

    def __post_init__(self) -> None:
        if isinstance(self.key, (str, bytes)) or not isinstance(self.key, Sequence) or not self.key:
            raise ConfigError("an outbox key is a non-empty tuple such as (changelist, recipient, version)")
        try:
            canonical(list(self.key))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"an outbox key must hold JSON values: {exc}") from None
        if not callable(self.send) or not callable(self.lookup):
            raise ConfigError("an outbox intent needs send and lookup functions")


@dataclass(frozen=True, slots=True)
class Delivery:
    key: tuple[JSON, ...]
    provider_id: str
    how: str  # "sent" now, "already_sent" before, or "reconciled" (found at the provider)


def deliver(intents: Sequence[Intent]) -> Any:
    """Apply every intent once (in an async task, ``await`` it). Returns the
    deliveries when all are done; otherwise, after trying every intent, raises
    the first permanent failure (its row is marked failed for an operator) or
    else the first retryable one, so the job fails or retries by its policy."""
    run = handler_run()
    if run.is_async:
        context = contextvars.copy_context()
        return asyncio.to_thread(context.run, _deliver_all, run, list(intents))
    return _deliver_all(run, list(intents))


def _deliver_all(run: HandlerRun, intents: list[Intent]) -> list[Delivery]:
    delivered: list[Delivery] = []
    failed: list[tuple[Exception, bool]] = []
    opened = [(n, intent, _open(run, intent)) for n, intent in enumerate(intents)]
    # A row marked sent without provider evidence is reconciled before any other send (§8.3).
    opened.sort(key=lambda item: (next_step(item[2]) is not Step.RECONCILE_MARKED, item[0]))
    for _, intent, row in opened:
        try:
            delivered.append(_deliver(run, intent, row))
        except LeaseLost:
            raise
        except Exception as exc:
            failed.append((exc, run.classifier.exception(exc, now=_now()).retryable))
    if failed:
        run.context.update(outbox_delivered=len(delivered), outbox_undelivered=len(failed))
        permanent = [exc for exc, retryable in failed if not retryable]
        raise (permanent or [failed[0][0]])[0]
    order = {intent.key: n for n, intent in enumerate(intents)}
    return sorted(delivered, key=lambda d: order[d.key])


def _open(run: HandlerRun, intent: Intent) -> OutboxRow:
    key, token = canonical(list(intent.key)), outbox_token(intent.key)
    return _fenced(run, run.store.outbox_open(lease=run.job.lease, key=key, token=token))


def _deliver(run: HandlerRun, intent: Intent, row: OutboxRow) -> Delivery:
    key, token = row.key, outbox_token(intent.key)  # the token is the key's, whatever the row says
    step = next_step(row)
    if step is Step.SKIP:
        assert row.provider_id is not None  # next_step skips only rows with the provider's id
        return Delivery(intent.key, row.provider_id, "already_sent")
    if step is not Step.SEND:
        if step is Step.RECONCILE_MARKED:
            # Send-then-mark was broken somewhere (§8.3): never send on top of it unchecked.
            log.warning("outbox row %s was marked sent without provider evidence; reconciling", token)
            run.events.emit("outbox.unconfirmed", job_id=str(run.job.id), task=run.job.task, queue=run.job.queue,
                            key=key)
        found = intent.lookup(token, row.provider_id)
        run.events.emit("outbox.reconciled", job_id=str(run.job.id), task=run.job.task, queue=run.job.queue, key=key, provider_id=found,
                        found=bool(found))
        if found:
            _update(run, key, token, OutboxChange(OutboxStatus.SENT, provider_id=found, notified=True, reconciled=True))
            log.info("outbox row %s: the provider had it (%s); not sent again", token, found)
            return Delivery(intent.key, found, "reconciled")
        _update(run, key, token, OutboxChange(OutboxStatus.PENDING, provider_id="", notified=False, reconciled=True))
    _update(run, key, token, OutboxChange(OutboxStatus.SENDING, send_started=True))
    try:
        provider_id = intent.send(token)
    except Exception as exc:
        failure = run.classifier.exception(exc, now=_now())
        if not failure.retryable:
            _update(run, key, token, OutboxChange(OutboxStatus.FAILED, error_code=failure.code,
                                           error_message=redact_text(failure.message)))
        elif isinstance(exc, NotDelivered):
            _update(run, key, token, OutboxChange(OutboxStatus.PENDING))  # known not taken: sent again, unasked
        raise  # otherwise the row stays sending, so the next attempt asks the provider first
    if not isinstance(provider_id, str) or not provider_id:
        raise ConfigError("an outbox send function must return the provider's message id (a string)")
    _update(run, key, token, OutboxChange(OutboxStatus.SENT, provider_id=provider_id, notified=True))
    run.events.emit("outbox.sent", job_id=str(run.job.id), task=run.job.task, queue=run.job.queue, key=key,
                    provider_id=provider_id)
    return Delivery(intent.key, provider_id, "sent")


def _update(run: HandlerRun, key: str, token: str, change: OutboxChange) -> OutboxRow:
    row = run.store.outbox_update(lease=run.job.lease, key=key, change=change)
    if row is None and run.store.outbox_open(lease=run.job.lease, key=key, token=token) is not None:
        # The lease holds but the row is gone: a failover to a standby that had
        # not received it. Written again; the token, the key's, is the same.
        log.warning("outbox row %s was gone while its job held the lease (a failover?); written again", token)
        row = run.store.outbox_update(lease=run.job.lease, key=key, change=change)
    return _fenced(run, row)


def _fenced(run: HandlerRun, row: OutboxRow | None) -> OutboxRow:
    if row is None:
        raise LeaseLost(f"job {run.job.id} lost its lease while delivering")
    return row


def _now() -> datetime:
    return datetime.now(UTC)
