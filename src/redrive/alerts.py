"""The evaluator of an app's alert rules (``app.alert(...)``, rules in
``redrive.core.alerts``): on a thread of its own it reads the queues from the
store and the jobs that ended lately from the event stream, every
``interval``, and tells each rule's transitions: a warning in the log, an
``alert.changed`` event, and a notification when notifications are on.

Run it in one process (``redrive worker --alerts`` or ``redrive serve
--alerts``): failure rates and durations are those of the jobs that process
saw end, and two evaluators would each notify. docs/alerts.md has the rest.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from datetime import timedelta
from typing import Any

from redrive.admin import Actor
from redrive.app import App
from redrive.core.alerts import (
    Check,
    DurationPercentile,
    Ended,
    FailureRate,
    Incidents,
    OldestQueuedAge,
    QueueDepth,
    QueueReading,
    Reading,
    Rule,
    Transition,
)
from redrive.core.durations import parse_duration
from redrive.core.states import Status
from redrive.errors import RedriveError
from redrive.events import Event

# The rules are declared with ``app.alert(...)``; they live in the core (no I/O).
__all__ = ["AlertEvaluator", "Check", "DurationPercentile", "FailureRate", "OldestQueuedAge", "QueueDepth", "Rule"]

log = logging.getLogger("redrive.alerts")

_KEPT = 100_000  # job endings remembered at most, whatever the windows


class AlertEvaluator:
    def __init__(self, app: App, *, notifications: Any = None, interval: timedelta | None = None) -> None:
        self.rules = list(app.registry.alert_rules.values())
        if interval is None:
            interval = parse_duration(os.environ.get("REDRIVE_ALERT_INTERVAL", "15s"))
        self.interval = interval
        self._app, self._notifications = app, notifications
        self._admin = app.admin(Actor.operator("alerts"))
        self._ended: deque[Ended] = deque(maxlen=_KEPT)
        self._incidents = Incidents()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe = app.events.subscribe(self._heard, names=["job.succeeded", "job.failed"])

    def _heard(self, event: Event) -> None:
        d = event.data
        self._ended.append(Ended(event.at, d["task"], d["duration_s"], event.name == "job.failed"))

    def evaluate(self) -> list[Transition]:
        """Check every rule once; returns the transitions, already told."""
        try:
            queues = [QueueReading(q.queue, q.counts.get(Status.QUEUED, 0), q.oldest_due_age_s)
                      for q in self._admin.queues()]
        except RedriveError as exc:
            log.warning("alerts: cannot read the queues, skipping this round: %s", exc)
            return []
        reading = Reading(now=time.time(), queues=queues, ended=list(self._ended))
        told = []
        for rule in self.rules:
            try:
                fires, detail = rule.check(reading)
            except Exception:
                log.exception("alert rule %s could not be checked", rule.name)
                continue
            transition = self._incidents.update(rule.name, fires, detail, reading.now)
            if transition is not None:
                self._tell(transition)
                told.append(transition)
        return told

    def _tell(self, t: Transition) -> None:
        log.warning("alert %s %s: %s", t.rule, t.state, t.detail)
        self._app.events.emit("alert.changed", rule=t.rule, state=t.state, detail=t.detail, incident=t.incident)
        if self._notifications is not None:
            try:
                self._notifications.alert(t.rule, t.state, t.detail, t.incident)
            except RedriveError as exc:
                log.error("alert %s %s could not be notified: %s", t.rule, t.state, exc)

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.interval.total_seconds()):
                self.evaluate()

        self._thread = threading.Thread(target=loop, name="redrive-alerts", daemon=True)
        self._thread.start()
        log.info("alerts on: %s, every %ss", ", ".join(r.name for r in self.rules), self.interval.total_seconds())

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.interval.total_seconds() + 5)
        self._unsubscribe()
