"""The evaluator of an app's alert rules (``app.alert(...)``, rules in
``redrive.core.alerts``): on a thread of its own, every ``interval``, it
reads from the store the queues, the jobs that ended lately (every
worker's) and the rules firing now, and tells each rule's transitions: a
warning in the log, an ``alert.changed`` event, and a notification when
notifications are on.

Which rules fire is kept in the store, and a transition is told only by the
evaluator whose write made it: one restarted while a rule fires does not
notify it again, and two at once tell each change once. docs/alerts.md has
the rest.
"""

from __future__ import annotations

import asyncio
import logging
import threading
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
from redrive.core.states import Status
from redrive.errors import RedriveError
from redrive.runtime.plugins import Beside, Plugin, until_cancelled

# The rules are declared with ``app.alert(...)``; they live in the core (no I/O).
__all__ = ["AlertEvaluator", "Check", "DurationPercentile", "FailureRate", "OldestQueuedAge", "QueueDepth", "Rule"]

log = logging.getLogger("redrive.alerts")

_READ_AT_MOST = 20_000  # job endings read a round, newest first: a sample of a busy window


class AlertEvaluator(Plugin):
    """``Worker(app.client, plugins=[AlertEvaluator(app, notifications=n)])``,
    or on a thread of its own with ``start()`` and ``stop()``."""

    name = "alerts"

    def __init__(self, app: App, *, notifications: Any = None, interval: timedelta | None = None) -> None:
        self.rules = list(app.registry.alert_rules.values())
        self.interval = interval or app.settings.alert_interval
        self._app, self._notifications = app, notifications
        self._admin = app.admin(Actor.operator("alerts"))
        # A depth rule decides on exact counts: queues counted one by one up to
        # the highest threshold, and no further (past it, any count fires).
        self._exact_up_to = max((rule.above + 1 for rule in self.rules if isinstance(rule, QueueDepth)), default=None)
        # the longest window a rule looks back over: the endings read each round
        self._lookback = max((getattr(rule, "window", timedelta(0)) for rule in self.rules), default=timedelta(0))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _reading(self) -> Reading:
        store = self._admin.store
        now = store.now()
        queues = [QueueReading(q.queue, q.counts.get(Status.QUEUED, 0), q.oldest_due_age_s)
                  for q in self._admin.queues(exact_up_to=self._exact_up_to)]
        ended = []
        if self._lookback > timedelta(0):
            runs = store.runs_ended(since=now - self._lookback, limit=_READ_AT_MOST)
            ended = [Ended(run.at.timestamp(), run.task, run.duration_s, run.failed) for run in reversed(runs)]
        return Reading(now=now.timestamp(), queues=queues, ended=ended)

    def evaluate(self) -> list[Transition]:
        """Check every rule once; returns the transitions this evaluator told."""
        store = self._admin.store
        try:
            reading = self._reading()
            incidents = Incidents(firing=store.alerts_firing())
        except RedriveError as exc:
            log.warning("alerts: cannot read the store, skipping this round: %s", exc)
            return []
        told = []
        for rule in self.rules:
            try:
                fires, detail = rule.check(reading)
            except Exception:
                log.exception("alert rule %s could not be checked", rule.name)
                continue
            transition = incidents.update(rule.name, fires, detail, reading.now)
            if transition is None:
                continue
            try:
                if transition.state == "firing":
                    ours = store.alert_fire(rule=rule.name, incident=transition.incident, detail=detail)
                else:
                    ours = store.alert_resolve(rule=rule.name, incident=transition.incident)
            except RedriveError as exc:
                log.warning("alerts: cannot record that %s is %s, trying next round: %s", rule.name,
                            transition.state, exc)
                continue
            if ours:  # another evaluator's write made it otherwise, and that one tells it
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

    async def run(self, beside: Beside) -> None:
        self.start()
        try:
            await until_cancelled()
        finally:
            await asyncio.to_thread(self.stop)

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
