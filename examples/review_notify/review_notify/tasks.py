"""The review-processing job (§6): one per (idempotency key, review
version), sending one email per recipient through redrive's outbox.

Each recipient is an outbox row keyed ``(changelist_id, recipient,
review_version)``; redrive's ``deliver`` re-reads it, skips it if it was
delivered, reconciles it through the provider's lookup if a send may have
happened (or if it was marked sent without the provider's id, which it
reports), and otherwise sends with a token derived from the key, then
records the provider's id and ``notified_at`` in one write. The job
succeeds only once every recipient's row is delivered; a transient failure
retries the job with backoff; a refused recipient marks its row failed and
the job goes to the dead letters for an operator.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from redrive import DEFAULT_TAXONOMY, App, Classifier, ErrorCode, FullJitter, Intent, Taxonomy, add_context, deliver
from review_notify.mailer import Mailer
from review_notify.settings import Settings

TASK = "notify_review"
TAXONOMY = Taxonomy([
    *DEFAULT_TAXONOMY,
    ErrorCode("PROVIDER_UNAVAILABLE", True, "The email provider is unavailable; the email will be retried."),
    ErrorCode("INVALID_RECIPIENT", False, "A recipient address is not valid; the caller must correct it."),
    ErrorCode("PROVIDER_REFUSED", False, "The email provider refused the message."),
])


def message(changelist_id: str, review_version: int) -> tuple[str, str]:
    """The email, the same on every try (a deterministic payload)."""
    return (f"Review of changelist {changelist_id} (v{review_version})",
            f"The review of changelist {changelist_id}, version {review_version}, is ready.")


def make_app(settings: Settings) -> App:
    app = App(settings.database_url, classifier=Classifier(taxonomy=TAXONOMY))
    mailer = Mailer(settings.provider_url, settings.provider_api_key, settings.sender, settings.send_timeout_s)

    @app.task(name=TASK, max_attempts=settings.max_attempts,
              backoff=FullJitter(initial=timedelta(seconds=settings.backoff_initial_s),
                                 cap=timedelta(seconds=settings.backoff_max_s)))
    def notify_review(changelist_id: str, review_version: int, recipients: list[str]) -> dict[str, Any]:
        add_context(changelist_id=changelist_id, review_version=review_version, recipients=len(recipients))
        subject, text = message(changelist_id, review_version)
        delivered = deliver([
            Intent(key=(changelist_id, recipient, review_version),
                   send=lambda token, r=recipient: mailer.send(r, subject, text, token),  # type: ignore[misc]
                   lookup=mailer.lookup)
            for recipient in dict.fromkeys(recipients)  # a recipient listed twice is notified once
        ])
        return {"review_version": review_version,
                "notified": {str(d.key[1]): d.provider_id for d in delivered}}

    return app
