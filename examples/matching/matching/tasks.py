"""The matching worker's redrive app (the design's §1, §2 and §5).

One job per document, ``match_document``. Each delivery marks the document
``in-progress`` and counts it in ``matching_attempts``; the LLM call is
retried inside the delivery (``LLM_TRIES``, ``LLM_RETRY_DELAYS_S``) by
the same classification, and those tries are not deliveries. A transient
failure that outlives them puts the document back to ``pending`` and the job
is delivered again after 5 then 30 minutes; on the third delivery, or at
once for a non-transient failure, the document is marked ``failed`` and the
admins are told, in the same transaction, and the job goes to redrive's dead
letters. A document ``in-progress`` for longer than ``STUCK_AFTER_S`` fires
the ``matching_stuck`` alarm.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from matching import documents
from matching.db import Db, connect, now
from matching.llm import match_decision
from matching.settings import Settings
from redrive import (
    DEFAULT_CLASSIFIER,
    App,
    Cancelled,
    Fixed,
    InProcessRetry,
    LeaseLost,
    add_context,
    current_job,
    write_phase,
)
from redrive.alerts import Check
from redrive.notify import Channel, Email, Notifications, Slack


def _seconds(values: tuple[float, ...]) -> Fixed:
    return Fixed([timedelta(seconds=s) for s in values])


def admin_notifications(app: App, settings: Settings) -> Notifications | None:
    """Slack and email, each on when configured (§5). The engine's own
    "job failed for good" message is off: the app tells its own, per document."""
    channels: list[Channel] = []
    if settings.slack_webhook_url:
        channels.append(Slack(settings.slack_webhook_url))
    if settings.smtp_host and settings.recipients:
        channels.append(Email(host=settings.smtp_host, port=settings.smtp_port, sender=settings.email_from,
                              recipients=settings.recipients, username=settings.smtp_user or None,
                              password=settings.smtp_password or None, starttls=settings.smtp_starttls))
    return Notifications(app, channels, failures=False) if channels else None


def make_app(settings: Settings) -> tuple[App, Notifications | None]:
    """The app and its admin notifications (None when no channel is configured)."""
    app = App(settings.database_url)
    notifications = admin_notifications(app, settings)
    llm = InProcessRetry(attempts=settings.llm_tries, backoff=_seconds(settings.llm_retry_delays_s))

    def failed(db: Db, document_id: str, error: str, attempts: int) -> None:
        """``failed`` and the admins' notification: both or neither."""
        with write_phase(db.conn):
            documents.mark(db, document_id, "failed", error=error)
            if notifications is not None:
                tenant = (db.one("SELECT tenant FROM document WHERE id = %s", document_id) or {}).get("tenant")
                notifications.tell(
                    f"Matching failed for document {document_id}",
                    [f"Document: {document_id}", f"Tenant: {tenant}", f"Error: {error}", f"Attempts: {attempts}",
                     f"{settings.admin_url.rstrip('/')}/documents/{document_id}"],
                    key=f"matching-failed:{document_id}:{current_job().id}", conn=db.conn)

    @app.task(max_attempts=settings.deliveries, backoff=_seconds(settings.redelivery_delays_s))
    def match_document(document_id: str) -> dict[str, Any]:
        job = current_job()
        add_context(document_id=document_id, delivery=job.attempts)
        with connect(settings.database_url) as db:
            documents.mark(db, document_id, "in-progress")
            try:
                doc = documents.preprocess(db, document_id)
                found = documents.candidates(db, doc)
                matches = llm.call(match_decision, settings, doc, found)
                cluster = documents.write_matches(db, document_id, matches)
            except (LeaseLost, Cancelled):
                raise  # another worker has the document now, or it was cancelled: nothing of ours to record
            except Exception as exc:
                failure = DEFAULT_CLASSIFIER.exception(exc, now=now())
                attempts = (db.one("SELECT matching_attempts FROM document WHERE id = %s", document_id)
                            or {}).get("matching_attempts", job.attempts)
                if failure.retryable and job.attempts < settings.deliveries:
                    documents.mark(db, document_id, "pending", error=failure.message)  # delivered again later
                else:
                    failed(db, document_id, failure.message, attempts)
                raise
        return {"matches": len(matches), "cluster": cluster}

    def stuck() -> tuple[bool, str]:
        with connect(settings.database_url) as db:
            found = documents.stuck(db, settings.stuck_after_s)
        shown = ", ".join(found[:10]) + (" …" if len(found) > 10 else "")
        return bool(found), (f"{len(found)} document(s) in-progress for over {settings.stuck_after_s:g} s "
                             f"(a crashed worker?): {shown}" if found else "no document is stuck in-progress")

    app.alert(Check("matching_stuck", stuck))
    return app, notifications


def create_tables(settings: Settings) -> None:
    with connect(settings.database_url) as db:
        db.create_tables()
