"""Notifications: Slack and email when a job fails for good, a replay
escalates, a breaker opens or closes, an outbox row is found marked sent
without the provider's id, a workflow fails or is blocked, or an alert rule
fires or resolves.

    from redrive.notify import Email, Notifications, Slack
    notifications = Notifications(app, [Slack(webhook_url)], base_url="https://ops.example.com/redrive")
    Worker(app.client, plugins=[notifications]).run_until_stopped()

``redrive worker`` and ``redrive serve`` set them up from the environment
(``from_env``): a channel configured is a channel enabled.

Each notification is a job of redrive's own task on its own queue (a worker
given the plugin serves it, two at a time in slots of their own besides its
concurrency), with a key made from what it is about, and it
sends through the outbox: a worker killed mid-send is neither lost nor
repeated (see ``channels`` for the one window a webhook leaves), and a
webhook that answers 500 or hangs is retried like any job, in a slot of
its own, while other jobs run. Failures are grouped: every job of one task
that fails for good within a window (a minute by default) makes one
message, sent when the window closes: the details of the first, and the
count by error code. docs/notifications.md has the rest.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import queue
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from redrive.admin import Actor
from redrive.app import App
from redrive.core.backoff import ProportionalJitter
from redrive.core.job import DeadLetter
from redrive.core.outbox import OutboxStatus
from redrive.core.redact import redact_text
from redrive.core.states import Status
from redrive.errors import ConfigError, RedriveError
from redrive.events import (
    BreakerChanged,
    Event,
    JobDeadLettered,
    NotificationUndelivered,
    OutboxUnconfirmed,
    WorkflowBlocked,
    WorkflowFailed,
)
from redrive.notify.channels import CannotAsk, Channel, Email, Message, Slack
from redrive.runtime.context import current_job
from redrive.runtime.outbox import Intent, deliver
from redrive.runtime.plugins import Beside, Plugin, until_cancelled
from redrive.settings import NOTIFY_TIMEOUT_MAX, Settings

__all__ = ["CannotAsk", "Channel", "Email", "Message", "Notifications", "Slack"]

log = logging.getLogger("redrive.notify")

TASK = QUEUE = "redrive.notify"
SHOWN = 5  # jobs detailed in a digest
_READ_AT_MOST = 10_000  # dead letters read for one digest; past this the count says "at least"
_GRACE = timedelta(seconds=5)  # a failure written just before a window closes is committed by then
# A channel's outage may last hours (a Slack incident): retries start at
# seconds and settle at one every 5 minutes.
RETRY_BACKOFF = ProportionalJitter(initial=timedelta(seconds=2), multiplier=2.0, spread=0.2,
                                   cap=timedelta(minutes=5))


def attempts_for(retry_for: timedelta) -> int:
    """Attempts whose backoff adds up to at least ``retry_for`` (the shortest
    delays the jitter can draw, so the retrying lasts that long at least)."""
    total, attempts = 0.0, 1
    floor = 1 - RETRY_BACKOFF.spread
    cap = RETRY_BACKOFF.cap.total_seconds() if RETRY_BACKOFF.cap else math.inf
    while total < retry_for.total_seconds():
        total += floor * min(cap, RETRY_BACKOFF.initial.total_seconds() * RETRY_BACKOFF.multiplier ** (attempts - 1))
        attempts += 1
    return attempts


class Notifications(Plugin):
    name = "notifications"
    queues = MappingProxyType({QUEUE: 2})  # sends at once, besides the worker's jobs

    def __init__(self, app: App, channels: Sequence[Channel], *, base_url: str | None = None,
                 window: timedelta = timedelta(minutes=1), failures: bool = True,
                 retry_for: timedelta = timedelta(hours=6)) -> None:
        """``failures=False``: jobs failing for good are not told (an app that
        tells its own, with ``tell``); escalations, breakers, outbox repairs
        and alerts still are. ``retry_for``: how long a notification is
        retried while a channel fails (the backoff grows to 5 minutes); one
        given up on is logged as an error, counted, and told on the channels
        that still work."""
        names = [c.name for c in channels]
        if not channels or len(set(names)) < len(names):
            raise ConfigError("notifications need at least one channel, each with its own name")
        if window <= timedelta(0):
            raise ConfigError("the notification window must be positive")
        if retry_for <= timedelta(0):
            raise ConfigError("the notification retry time must be positive")
        self.app, self.channels, self.window = app, list(channels), window
        self.base_url = base_url.rstrip("/") if base_url else None
        self.failures = failures
        self._admin = app.admin(Actor.operator("notifications"))
        self._todo: queue.Queue[Event | threading.Event] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.retry_for = retry_for
        app.task(name=TASK, queue=QUEUE, max_attempts=attempts_for(retry_for), backoff=RETRY_BACKOFF,
                 timeout=NOTIFY_TIMEOUT_MAX * len(channels) + timedelta(seconds=30))(self._send)
        app.events.subscribe(self._heard, names=[JobDeadLettered, BreakerChanged, OutboxUnconfirmed, WorkflowFailed,
                                                 WorkflowBlocked])

    @classmethod
    def from_env(cls, app: App, environ: Mapping[str, str] | None = None) -> Notifications | None:
        """The channels the settings configure (``Settings``, from the environment:
        docs/notifications.md), or None when none is."""
        settings = Settings.load(environ)
        channels: list[Channel] = []
        timeout_s = settings.notify_timeout.total_seconds()
        if settings.slack_webhook_url:
            channels.append(Slack(settings.slack_webhook_url, timeout_s=timeout_s))
        if settings.smtp_host:
            channels.append(Email(
                host=settings.smtp_host, port=settings.smtp_port, sender=settings.email_from,
                recipients=[r.strip() for r in settings.email_to.split(",") if r.strip()],
                username=settings.smtp_user or None, password=settings.smtp_password or None,
                starttls=settings.smtp_starttls, timeout_s=timeout_s,
            ))
        if not channels:
            return None
        return cls(app, channels, base_url=settings.dashboard_url or None, window=settings.notify_window,
                   retry_for=settings.notify_retry_for)

    # -- what to notify: enqueued off the thread that emitted ------------------------

    def _heard(self, event: Event) -> None:
        if getattr(event, "task", None) == TASK and not isinstance(event, JobDeadLettered):
            return  # of its own jobs, only one given up on is told (_undelivered)
        if isinstance(event, BreakerChanged) and event.to_state not in ("open", "closed"):
            return
        self._todo.put(event)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._enqueue_all, name="redrive-notify", daemon=True)
                self._thread.start()

    async def run(self, beside: Beside) -> None:
        """Beside a worker: serve the queue; when the worker stops, every
        notification heard so far is enqueued before it exits."""
        try:
            await until_cancelled()
        finally:
            await asyncio.to_thread(self.flush)

    def flush(self, timeout_s: float = 10.0) -> None:
        """Wait until every notification heard so far is enqueued (a stopping process calls it)."""
        done = threading.Event()
        self._todo.put(done)
        with self._lock:
            if self._thread is None:
                return
        done.wait(timeout_s)

    def _enqueue_all(self) -> None:
        while True:
            event = self._todo.get()
            if isinstance(event, threading.Event):  # a flush: everything before it is enqueued
                event.set()
                continue
            for attempt in range(5):
                try:
                    self._enqueue(event)
                    break
                except RedriveError as exc:
                    log.warning("cannot enqueue the notification of %s (try %d): %s", event.name, attempt + 1, exc)
                    threading.Event().wait(2 ** attempt)

    def _enqueue(self, event: Event) -> None:
        match event:
            case JobDeadLettered(task=task, job_id=job_id) if task == TASK:
                self._undelivered(job_id)
            case JobDeadLettered(dead_letter_id=None):
                return
            case JobDeadLettered(escalated=False, task=task, dead_letter_id=int() as letter_id):
                if not self.failures:
                    return
                # One notification per task and window, sent when the window closes.
                failed_at = self._admin.dead_letter(letter_id).last_failure_at.timestamp()
                width = self.window.total_seconds()
                start = math.floor(failed_at / width) * width
                end = datetime.fromtimestamp(start + width, UTC)
                self._notify(["failed", task, start, start + width], f"failed:{task}:{start:.0f}",
                             run_at=end + _GRACE)
            case JobDeadLettered(task=task, dead_letter_id=letter_id):
                self._notify(["escalated", task, letter_id], f"escalated:{letter_id}")
            case BreakerChanged():
                self._notify(["breaker", event.dependency, event.to_state, event.reason, event.at],
                             f"breaker:{event.dependency}:{event.to_state}:{event.at:.3f}")
            case OutboxUnconfirmed():
                self._notify(["outbox", event.task, event.job_id, event.key], f"outbox:{event.job_id}:{event.key}")
            case WorkflowFailed() | WorkflowBlocked():
                became = "failed" if isinstance(event, WorkflowFailed) else "blocked"
                self._notify(["workflow", event.workflow, event.workflow_id, became, event.job_id],
                             f"workflow:{event.workflow_id}:{became}:{event.job_id}:{event.at:.3f}")

    def _undelivered(self, job_id: str) -> None:
        """A notification failed for good: loud in the log and the metrics,
        and told on the channels that took it (never about itself: no loops)."""
        job = self._admin.job(job_id)
        about = str(job.args[0]) if job.args else "?"
        taken = {json.loads(row.key)[2] for row in self._admin.outbox(job_id=job_id, limit=100)
                 if row.status is OutboxStatus.SENT}
        failed = [c.name for c in self.channels if c.name not in taken] or [c.name for c in self.channels]
        self.app.events.emit(NotificationUndelivered(job_id=job_id, about=about, channels=",".join(failed)))
        log.error("gave up on a notification (%s) after %s: %s never took it (%s: %s)", about, self.retry_for,
                  ", ".join(failed), job.error_code, job.error_message)
        if about != "undelivered" and len(failed) < len(self.channels):
            self._notify(["undelivered", about, job_id, failed, job.args], f"undelivered:{job_id}")

    def alert(self, rule: str, state: str, detail: str, incident: str) -> None:
        """An alert rule fired or resolved (``redrive.alerts``)."""
        self._notify(["alert", rule, state, detail], f"alert:{rule}:{incident}:{state}")

    def tell(self, subject: str, lines: Sequence[str], *, key: str, conn: Any = None) -> None:
        """Send the application's own message on every channel, once per
        ``key`` however often it is told (a retry, a second worker): the
        matching system tells admins of a failed document this way. With
        ``conn``, enqueued in that open transaction (``Client.enqueue``)."""
        if not isinstance(subject, str) or not subject.strip() or isinstance(lines, str):
            raise ConfigError("tell() takes a subject line and a list of lines")
        self.app.client.enqueue(TASK, args=["message", subject, [str(line) for line in lines]],
                                idempotency_key=f"message:{key}"[:255], conn=conn)

    def _notify(self, args: list[Any], key: str, *, run_at: datetime | None = None) -> None:
        self.app.client.enqueue(TASK, args=args, idempotency_key=key[:255], run_at=run_at)

    # -- the task: build the message and send it on every channel once ---------------

    def _send(self, kind: str, subject: str, *rest: Any) -> dict[str, Any]:
        message = self._message(kind, subject, *rest)
        if message is None:
            return {"sent": 0}
        job = current_job()
        failed = rest[1] if kind == "undelivered" else ()  # told on the others only
        intents = [Intent(key=("notify", str(job.id), channel.name),
                          send=lambda token, c=channel: c.send(message, token),  # type: ignore[misc]
                          lookup=channel.lookup)
                   for channel in self.channels if channel.name not in failed]
        return {"sent": len(deliver(intents))}

    def _message(self, kind: str, subject: str, *rest: Any) -> Message | None:
        if kind == "failed":
            return self._failures(subject, *rest)
        if kind == "escalated":
            letter = self._admin.dead_letter(rest[0])
            return _clean(f"Escalated: {subject} failed again the same way after a replay",
                          [*self._job_lines(letter), self._link(f"/dead-letters/{letter.id}")])
        if kind == "breaker":
            name, to_state, reason, _ = subject, *rest
            if to_state == "open":
                return _clean(f"Breaker {name} opened", [f"Calls to {name} stop: {reason}.",
                                                          "Held jobs resume by themselves when it closes.",
                                                          self._link("/breakers")])
            return _clean(f"Breaker {name} closed", [f"Calls to {name} go through again ({reason}).",
                                                      self._link("/breakers")])
        if kind == "outbox":
            job_id, key = rest
            return _clean(f"Outbox row of {subject} marked sent without the provider's id",
                          [f"Job {job_id}, outbox key {key}: the send-then-mark order was broken somewhere.",
                           "It was reconciled with the provider before anything was sent again.",
                           self._link(f"/jobs/{job_id}")])
        if kind == "message":
            return _clean(subject, rest[0])
        if kind == "undelivered":
            job_id, failed, original = rest
            told = self._message(*original)
            lines = [f"redrive tried for {self.retry_for} and gave up (job {job_id}).",
                     *([f"It said: {told.subject}", told.body] if told else [])]
            return _clean(f"A notification was not delivered on {', '.join(failed)}", lines)
        if kind == "workflow":
            return self._workflow(subject, *rest)
        if kind == "alert":
            state, detail = rest
            verb = "firing" if state == "firing" else "resolved"
            return _clean(f"Alert {subject} {verb}", [detail, self._link("/")])
        raise ConfigError(f"no such notification: {kind!r}")

    def _failures(self, task: str, start: float, end: float) -> Message | None:
        now = self._admin.store.now().timestamp()
        letters: list[DeadLetter] = []
        after = None
        while len(letters) < _READ_AT_MOST:
            page = self._admin.dead_letters(task=task, newer_than=timedelta(seconds=now - start + 60),
                                            after=after, limit=1000)
            letters += [x for x in page if start <= x.last_failure_at.timestamp() < end]
            if not page.more:
                break
            after = page.next_cursor
        if not letters:
            return None
        letters.sort(key=lambda x: x.last_failure_at)
        when = f"{_clock(start)}–{_clock(end)} UTC"
        count = f"{len(letters)}{'+' if len(letters) >= _READ_AT_MOST else ''}"
        if len(letters) == 1:
            (letter,) = letters
            return _clean(f"Job failed for good: {task} ({letter.error_code})",
                          [*self._job_lines(letter), self._link(f"/jobs/{letter.job_id}")])
        codes = Counter(x.error_code for x in letters)
        lines = [f"{count} jobs of {task} failed for good, {when}.",
                 "By error code: " + ", ".join(f"{code} ×{n}" for code, n in codes.most_common()) + ".",
                 f"The first {min(SHOWN, len(letters))}:"]
        for letter in letters[:SHOWN]:
            lines.append(f"- {letter.job_id} (owner {letter.owner or '-'}): {letter.error_code}: "
                         f"{letter.error_message} (attempts: {letter.attempts})")
        lines.append(self._link(f"/dead-letters?task={task}"))
        return _clean(f"{count} jobs of {task} failed for good", lines)

    def _workflow(self, name: str, workflow_id: str, became: str, job_id: str) -> Message:
        """A workflow that failed, or whose step's failure blocks steps after it."""
        state = self._admin.workflow(workflow_id)
        counts = ", ".join(f"{n} {status.value}" for status, n in sorted(state.totals.items()) if n)
        step = self._admin.job(job_id)
        if step.status is not Status.FAILED:  # the last step to end: tell of one that failed
            failed = self._admin.store.workflow_jobs(id=state.id, statuses=(Status.FAILED,))
            step = self._admin.job(failed[0]) if failed else step
        # its dead letter keeps the failure: a retry of the workflow may have cleared the step's row by now
        letters = self._admin.dead_letters(job_id=step.id, limit=1).items
        code, message = (letters[0].error_code, letters[0].error_message) if letters else (
            step.error_code, step.error_message)
        failure = f"{step.task} ({step.id}): {code}: {message}"
        if became == "failed":
            return _clean(f"Workflow {name} failed", [f"Every step has ended; a step failed for good: {failure}.",
                                                       f"Steps: {counts}.", self._link(f"/workflows/{workflow_id}")])
        return _clean(f"Workflow {name} is blocked",
                      [f"A step failed for good: {failure}.", "The steps after it wait until it is retried "
                       f"(redrive workflows retry {workflow_id}) or its dead letter replayed.", f"Steps: {counts}.",
                       self._link(f"/workflows/{workflow_id}")])

    def _job_lines(self, letter: DeadLetter) -> list[str]:
        return [f"Job: {letter.job_id}", f"Owner: {letter.owner or '-'}", f"Task: {letter.task}",
                f"Error: {letter.error_code}: {letter.error_message}", f"Attempts: {letter.attempts}"]

    def _link(self, path: str) -> str:
        return f"{self.base_url}{path}" if self.base_url else ""


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S")


def _clean(subject: str, lines: list[str]) -> Message:
    """Redacted, again: what goes out is held to the rule every surface keeps."""
    return Message(redact_text(subject), redact_text("\n".join(line for line in lines if line)))
