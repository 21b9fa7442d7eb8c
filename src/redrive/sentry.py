"""Failures reported to Sentry: needs the ``sentry`` extra (``pip install
'redrive[sentry]'``) and ``sentry_sdk.init(...)`` done by your app, or
``REDRIVE_SENTRY_DSN`` for ``redrive worker`` to do it.

    worker = Worker(app.client, plugins=[SentryReports(app)])   # or: redrive worker, REDRIVE_SENTRY_DSN set

A job that fails for good is one Sentry event: its message says the task
and the error code, its tags are the job's task, queue, attempt, error code
and class and owner, its context is the dead letter's (already redacted
when it was stored: ids, counts, what the task told with ``add_context``,
never its arguments), and its fingerprint groups the events by task and
error code rather than by message. ``attempts=True`` reports each failed
attempt that will be retried too, at the ``warning`` level.

Events are heard on the thread that announces them and sent from one of
the reporter's own, so a slow Sentry never holds a worker's job; the
reporter flushes what it has when the worker stops.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from redrive.errors import ConfigError, RedriveError

try:
    import sentry_sdk
except ImportError as exc:  # the engine runs without the sentry extra
    raise ConfigError("Sentry reports need the sentry extra: pip install 'redrive[sentry]'") from exc

from redrive.admin import Actor
from redrive.app import App
from redrive.core.redact import redact, redact_text
from redrive.events import Event, JobDeadLettered, JobRetryScheduled
from redrive.runtime.plugins import Beside, Plugin, until_cancelled

log = logging.getLogger("redrive.sentry")

_FLUSH_S = 5.0


def start_sentry(dsn: str) -> None:
    """``sentry_sdk.init`` as ``redrive worker`` does it with ``REDRIVE_SENTRY_DSN``:
    only what this reporter sends (no log records, no integrations of the
    SDK's choosing, no personal data)."""
    sentry_sdk.init(dsn=dsn, default_integrations=False, auto_enabling_integrations=False,
                    send_default_pii=False)


class SentryReports(Plugin):
    name = "sentry"

    def __init__(self, app: App, *, attempts: bool = False) -> None:
        self._admin = app.admin(Actor.operator("sentry"))
        self._todo: queue.SimpleQueue[Event | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._send_all, name="redrive-sentry", daemon=True)
        self._thread.start()
        names = ["job.dead_lettered", *(["job.retry_scheduled"] if attempts else [])]
        self._unsubscribe = app.events.subscribe(self._todo.put, names=names)

    async def run(self, beside: Beside) -> None:
        try:
            await until_cancelled()
        finally:
            self.close()

    def close(self) -> None:
        """Stop hearing; send what was heard, then flush the SDK's queue."""
        self._unsubscribe()
        self._todo.put(None)
        self._thread.join(_FLUSH_S)
        sentry_sdk.flush(timeout=_FLUSH_S)

    def _send_all(self) -> None:
        while (event := self._todo.get()) is not None:
            try:
                self._send(event)
            except RedriveError as exc:  # the store did not answer: reported without the letter's detail
                log.warning("reporting %s of job %s to Sentry without its details: %s",
                            event.name, getattr(event, "job_id", "?"), exc)
                self._capture(event, {}, "error" if isinstance(event, JobDeadLettered) else "warning")
            except Exception:  # a reporter must not stop reporting
                log.exception("reporting %s to Sentry failed", event.name)

    def _send(self, event: Event) -> None:
        if isinstance(event, JobDeadLettered) and event.dead_letter_id is not None:
            letter = self._admin.dead_letter(event.dead_letter_id)
            detail: dict[str, Any] = {
                "owner": letter.owner, "attempt": letter.attempts, "error_code": letter.error_code,
                "message": letter.error_message, "context": letter.context, "stage_attempts": letter.stage_attempts,
                "dead_letter_id": letter.id, "escalated": letter.escalated,
            }
            self._capture(event, detail, "error")
        elif isinstance(event, JobRetryScheduled):
            self._capture(event, {"attempt": event.attempt, "error_code": event.error_code,
                                  "retry_in_s": round(event.delay_s, 3)}, "warning")

    def _capture(self, event: Event, detail: dict[str, Any], level: str) -> None:
        task, queue_name = getattr(event, "task", "?"), getattr(event, "queue", "?")
        code = detail.get("error_code") or getattr(event, "error_code", None) or getattr(event, "error_class", "?")
        with sentry_sdk.new_scope() as scope:
            tags = {"redrive.task": task, "redrive.queue": queue_name, "redrive.error_code": code,
                    "redrive.error_class": getattr(event, "error_class", None),
                    "redrive.attempt": detail.get("attempt"), "redrive.owner": detail.get("owner"),
                    "redrive.stage": getattr(event, "stage", None)}
            for key, value in tags.items():
                if value is not None:
                    scope.set_tag(key, redact_text(str(value)))
            scope.set_context("redrive job", redact({"job_id": getattr(event, "job_id", None), **detail}))
            scope.fingerprint = ["redrive", task, str(code)]
            what = "failed for good" if level == "error" else "failed an attempt, to be retried"
            sentry_sdk.capture_message(redact_text(f"job {task} {what}: {code}"), level=level)  # type: ignore[arg-type]
