"""Prometheus metrics: counters and histograms fed by an app's event stream,
and gauges read from the store when they are scraped. Needs the ``metrics``
extra: ``pip install redrive[metrics]``.

    metrics = Metrics(app)            # subscribes to app.events
    metrics.serve(9100)               # or: redrive worker --metrics-port 9100
    body = metrics.exposition()       # or: /metrics of `redrive serve`

Counters count what *this process* saw (a worker its runs, an API server its
enqueues and manual retries): Prometheus adds the processes up. Gauges
(queue depth, oldest due job, breakers) are the store's, the same from every
process that serves them: aggregate them with ``max``, not ``sum``. They are
read with the same queries as ``redrive queues`` and ``redrive breakers``,
over active jobs only, never by counting finished ones.

Labels are low-cardinality by design (task, queue, error code, dependency;
never a job id or owner), and every label value passes through redaction.
The list of metrics is ``docs/observability.md``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from redrive.errors import ConfigError

try:
    from prometheus_client import CollectorRegistry, generate_latest, start_http_server
except ImportError as exc:  # the engine runs without the metrics extra
    raise ConfigError("metrics need the metrics extra: pip install 'redrive[metrics]'") from exc

from redrive.app import App
from redrive.events import Event
from redrive.metrics.gauges import StoreGauges
from redrive.metrics.tally import BUCKETS, COUNTERS, ENDS, HISTOGRAMS, ProcessTallies, Tally
from redrive.runtime.link import Link
from redrive.runtime.plugins import Beside, Plugin, until_cancelled

__all__ = ["BUCKETS", "CONTENT_TYPE", "COUNTERS", "HISTOGRAMS", "Metrics", "MetricsEndpoint", "MetricsToSupervisor",
           "ProcessTallies", "StoreGauges", "Tally"]

log = logging.getLogger("redrive.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self, app: App, *, buckets: Sequence[float] = BUCKETS, gauges: bool = True) -> None:
        self.registry = CollectorRegistry()
        self.tally = t = Tally(buckets)
        self.registry.register(t)
        if gauges:
            self.registry.register(StoreGauges(app))
        inc = t.inc
        self._handlers: dict[str, Callable[[Any], None]] = {
            "job.enqueued": lambda e: inc("redrive_jobs_enqueued", (e.task, e.queue)),
            "job.cancelled": lambda e: inc("redrive_jobs_completed", (e.task, e.queue, "cancelled", "")),
            "job.dead_lettered": lambda e: inc("redrive_dead_letters_opened", (e.task, e.queue, e.error_class)),
            "job.escalated": lambda e: inc("redrive_dead_letters_escalated", (e.task, e.queue, e.error_class)),
            "job.lease_lost": lambda e: inc("redrive_lease_losses", (e.task, e.queue)),
            "job.reclaimed": lambda e: inc("redrive_jobs_reclaimed", ()),
            "job.held": lambda e: inc("redrive_jobs_held", (e.task, e.queue, e.dependency)),
            "job.retried": lambda e: inc("redrive_jobs_manually_retried", (e.task, e.queue)),
            "job.replayed": lambda e: inc("redrive_jobs_replayed", (e.task, e.queue, e.replay_from)),
            "job.resolved": lambda e: inc("redrive_dead_letters_resolved", (e.task, e.queue)),
            "job.cancel_requested": lambda e: inc("redrive_cancels_requested", (e.task, e.queue)),
            "outbox.sent": lambda e: inc("redrive_outbox_sends", (e.task, e.queue)),
            "outbox.reconciled": lambda e: inc("redrive_outbox_reconciliations",
                                               (e.task, e.queue, "true" if e.found else "false")),
            "outbox.unconfirmed": lambda e: inc("redrive_outbox_unconfirmed", (e.task, e.queue)),
            "breaker.changed": lambda e: inc("redrive_breaker_transitions", (e.dependency, e.to_state)),
            "notification.undelivered": self._undelivered,
            "schedule.fired": lambda e: inc("redrive_schedule_firings", (e.schedule,), e.firings),
            "workflow.blocked": lambda e: inc("redrive_workflow_steps_blocked", (), e.blocked),
            "workflow.succeeded": lambda e: inc("redrive_workflows_ended", ("succeeded",)),
            "workflow.failed": lambda e: inc("redrive_workflows_ended", ("failed",)),
            "workflow.cancelled": lambda e: inc("redrive_workflows_ended", ("cancelled",)),
        }
        # An attempt's end goes straight to the tally: a worker has one a job.
        self._stops = [app.events.subscribe(self._on_event, names=self._handlers),
                       app.events.subscribe(t.ended, names=ENDS)]

    def unsubscribe(self) -> None:
        for stop in self._stops:
            stop()

    def exposition(self) -> bytes:
        """The text a Prometheus scrape reads (``CONTENT_TYPE``)."""
        return generate_latest(self.registry)

    def serve(self, port: int, host: str = "127.0.0.1") -> Any:
        """Serve ``/metrics`` on a thread of its own; returns the server."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        return server

    def _on_event(self, event: Event) -> None:
        self._handlers[event.name](event)

    def _undelivered(self, event: Any) -> None:
        for channel in event.channels.split(","):  # one count for each channel that gave up
            self.tally.inc("redrive_notifications_undelivered", (channel, event.about))


class MetricsEndpoint(Plugin):
    """``/metrics`` of ``app`` served beside a worker, on ``host:port`` (port
    0: one the system picks, ``address`` says which). The port is taken when
    it is made, so one in use is an error before the worker starts; it is
    let go when the worker stops. A supervisor's (``processes=True``) adds
    up its worker processes' counts as they report them (``reported``)."""

    name = "metrics"

    def __init__(self, app: App, port: int, host: str = "127.0.0.1", *, processes: bool = False) -> None:
        self.metrics = Metrics(app)
        self.tallies: ProcessTallies | None = None
        if processes:
            self.tallies = ProcessTallies(self.metrics.tally)
            self.metrics.registry.unregister(self.metrics.tally)
            self.metrics.registry.register(self.tallies)
        try:
            self._server = self.metrics.serve(port, host)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {host}:{port}: {exc.strerror}") from None
        self.address = f"http://{host}:{self._server.server_port}/metrics"
        log.info("metrics at %s", self.address)

    async def run(self, beside: Beside) -> None:
        try:
            await until_cancelled()
        finally:
            await asyncio.to_thread(self.close)

    def close(self) -> None:
        self.metrics.unsubscribe()
        self._server.shutdown()


class MetricsToSupervisor(Plugin):
    """A supervised worker process's counts, sent to its supervisor every
    ``interval_s`` and once more when it stops, for the supervisor's
    ``--metrics-port`` to serve with every other child's."""

    name = "metrics"
    interval_s = 1.0

    def __init__(self, app: App) -> None:
        self.metrics = Metrics(app, gauges=False)  # the store's gauges are the supervisor's to read

    async def run(self, beside: Beside) -> None:
        try:
            while True:
                await asyncio.sleep(self.interval_s)
                self._send()
        finally:
            self._send()
            self.metrics.unsubscribe()

    def _send(self) -> None:
        link = Link.current()
        if link is not None:
            link.counts(self.metrics.tally.snapshot())


