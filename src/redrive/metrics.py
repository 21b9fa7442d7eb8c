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

import logging
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from typing import Any

from redrive.errors import ConfigError

try:
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, start_http_server
    from prometheus_client.core import GaugeMetricFamily, Metric
    from prometheus_client.registry import Collector
except ImportError as exc:  # the engine runs without the metrics extra
    raise ConfigError("metrics need the metrics extra: pip install 'redrive[metrics]'") from exc

from redrive.admin import Actor
from redrive.app import App
from redrive.core.breaker import State, failure_percent, time_open
from redrive.core.redact import redact_text
from redrive.core.states import Status
from redrive.errors import RedriveError
from redrive.events import Event

log = logging.getLogger("redrive.metrics")

# Jobs run from milliseconds to an hour: the default buckets span both
# (Prometheus' own stop at 10 s, which peers' users rebucket first thing).
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
           1800.0, 3600.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@lru_cache(maxsize=4096)
def _label(value: Any) -> str:
    """A label value: text, redacted (a queue name is whatever a client sent)."""
    return "" if value is None else redact_text(str(value))


class Metrics:
    def __init__(self, app: App, *, buckets: Sequence[float] = BUCKETS, gauges: bool = True) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        job = ["task", "queue"]
        self.enqueued = Counter("redrive_jobs_enqueued", "Jobs created by this process.", job, registry=r)
        self.completed = Counter("redrive_jobs_completed",
                                 "Jobs that ended: succeeded, failed (for good) or cancelled.",
                                 [*job, "outcome", "error_code"], registry=r)
        self.retries = Counter("redrive_job_retries_scheduled", "Failed attempts put back on the queue.",
                               [*job, "error_code"], registry=r)
        self.manual_retries = Counter("redrive_jobs_manually_retried", "Failed jobs retried by hand.", job,
                                      registry=r)
        self.replays = Counter("redrive_jobs_replayed", "Dead letters replayed.", [*job, "replay_from"],
                               registry=r)
        self.dead_letters = Counter("redrive_dead_letters_opened", "Dead letters written.",
                                    [*job, "error_class"], registry=r)
        self.escalations = Counter("redrive_dead_letters_escalated",
                                   "Dead letters escalated: a replay failed again the same way.",
                                   [*job, "error_class"], registry=r)
        self.lease_losses = Counter("redrive_lease_losses", "Runs whose lease was gone before they ended.", job,
                                    registry=r)
        self.reclaims = Counter("redrive_jobs_reclaimed", "Expired leases given back to the queue.", registry=r)
        self.held = Counter("redrive_jobs_held", "Jobs held back by an open breaker.", [*job, "dependency"],
                            registry=r)
        self.cancels = Counter("redrive_cancels_requested", "Cancels asked of running jobs.", job, registry=r)
        self.outbox_sends = Counter("redrive_outbox_sends", "Outbox side effects sent and recorded.", job,
                                    registry=r)
        self.outbox_reconciliations = Counter("redrive_outbox_reconciliations",
                                              "Sends that may have happened, looked up at the provider first.",
                                              [*job, "found"], registry=r)
        self.outbox_unconfirmed = Counter("redrive_outbox_unconfirmed",
                                          "Outbox rows found marked sent without the provider's id.", job,
                                          registry=r)
        self.breaker_changes = Counter("redrive_breaker_transitions", "Breaker state changes.",
                                       ["dependency", "to_state"], registry=r)
        self.schedule_firings = Counter("redrive_schedule_firings", "Schedule firings enqueued.", ["schedule"],
                                        registry=r)
        self.duration = Histogram("redrive_job_duration_seconds", "How long attempts ran, by how they ended.",
                                  [*job, "outcome"], buckets=buckets, registry=r)
        self.wait = Histogram("redrive_job_queue_wait_seconds",
                              "From when a job was due to when a worker took it.", job, buckets=buckets,
                              registry=r)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        if gauges:
            r.register(StoreGauges(app))
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "job.enqueued": lambda d: self._child(self.enqueued, _label(d["task"]), _label(d["queue"])).inc(),
            "job.claimed": self._claimed,
            "job.succeeded": self._succeeded,
            "job.retry_scheduled": self._retry,
            "job.failed": self._failed,
            "job.cancelled": lambda d: self._ended(d, "cancelled", ""),
            "job.dead_lettered": lambda d: self._child(self.dead_letters, *_job(d), _label(d["error_class"])).inc(),
            "job.escalated": lambda d: self._child(self.escalations, *_job(d), _label(d["error_class"])).inc(),
            "job.lease_lost": lambda d: self._child(self.lease_losses, *_job(d)).inc(),
            "job.reclaimed": lambda d: self.reclaims.inc(),
            "job.held": lambda d: self._child(self.held, *_job(d), _label(d["dependency"])).inc(),
            "job.retried": lambda d: self._child(self.manual_retries, *_job(d)).inc(),
            "job.replayed": lambda d: self._child(self.replays, *_job(d), _label(d["replay_from"])).inc(),
            "job.cancel_requested": lambda d: self._child(self.cancels, *_job(d)).inc(),
            "outbox.sent": lambda d: self._child(self.outbox_sends, *_job(d)).inc(),
            "outbox.reconciled": lambda d: self._child(self.outbox_reconciliations, 
                *_job(d), "true" if d["found"] else "false").inc(),
            "outbox.unconfirmed": lambda d: self._child(self.outbox_unconfirmed, *_job(d)).inc(),
            "breaker.changed": lambda d: self._child(self.breaker_changes, _label(d["name"]), d["to_state"]).inc(),
            "schedule.fired": lambda d: self._child(self.schedule_firings, _label(d["schedule"])).inc(d["firings"]),
        }
        self.unsubscribe = app.events.subscribe(self._on_event, names=self._handlers)

    def _child(self, metric: Any, *values: str) -> Any:
        """A metric's labelled child, kept: prometheus_client looks it up under a lock each time."""
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def exposition(self) -> bytes:
        """The text a Prometheus scrape reads (``CONTENT_TYPE``)."""
        return generate_latest(self.registry)

    def serve(self, port: int, host: str = "127.0.0.1") -> Any:
        """Serve ``/metrics`` on a thread of its own; returns the server."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        return server

    def _on_event(self, event: Event) -> None:
        self._handlers[event.name](event.data)  # type: ignore[arg-type]

    def _claimed(self, d: dict[str, Any]) -> None:
        if d["wait_s"] is not None:
            self._child(self.wait, *_job(d)).observe(max(0.0, d["wait_s"]))

    def _succeeded(self, d: dict[str, Any]) -> None:
        self._child(self.duration, *_job(d), "succeeded").observe(d["duration_s"])
        self._ended(d, "succeeded", "")

    def _retry(self, d: dict[str, Any]) -> None:
        self._child(self.duration, *_job(d), "retried").observe(d["duration_s"])
        self._child(self.retries, *_job(d), _label(d["error_code"])).inc()

    def _failed(self, d: dict[str, Any]) -> None:
        self._child(self.duration, *_job(d), "failed").observe(d["duration_s"])
        self._ended(d, "failed", _label(d["error_code"]))

    def _ended(self, d: dict[str, Any], outcome: str, error_code: str) -> None:
        self._child(self.completed, *_job(d), outcome, error_code).inc()


def _job(d: dict[str, Any]) -> tuple[str, str]:
    return _label(d["task"]), _label(d["queue"])


class StoreGauges(Collector):
    """What the store holds now, read at each scrape: the queues' depth by
    state, their oldest due job's wait and pauses, and each breaker. If the
    store cannot be read, ``redrive_store_up`` is 0 and the rest is left out."""

    def __init__(self, app: App) -> None:
        self._admin = app.admin(Actor.operator("metrics"))

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("redrive_store_up", "1 when the store answered this scrape.")
        try:
            queues, breakers = self._admin.queues(), self._admin.breakers()
        except RedriveError as exc:
            log.warning("metrics: cannot read the store: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        depth = GaugeMetricFamily("redrive_queue_jobs", "Active jobs by queue and state.", labels=["queue", "state"])
        running = GaugeMetricFamily("redrive_jobs_running", "Jobs running now, by queue.", labels=["queue"])
        oldest = GaugeMetricFamily("redrive_queue_oldest_due_age_seconds",
                                   "How long the oldest due job has waited; 0 when none waits.", labels=["queue"])
        paused = GaugeMetricFamily("redrive_queue_paused", "1 while an operator has paused the queue.",
                                   labels=["queue"])
        for q in queues:
            name = _label(q.queue)
            for status, count in q.counts.items():
                depth.add_metric([name, str(status)], count)
            running.add_metric([name], q.counts.get(Status.RUNNING, 0))
            oldest.add_metric([name], q.oldest_due_age_s or 0.0)
            paused.add_metric([name], 1 if q.paused_by is not None else 0)
        yield from (depth, running, oldest, paused)
        state = GaugeMetricFamily("redrive_breaker_state", "1 for each breaker's current state.",
                                  labels=["dependency", "state"])
        opened = GaugeMetricFamily("redrive_breaker_open_seconds", "How long the breaker has been open; 0 when closed.",
                                   labels=["dependency"])
        failing = GaugeMetricFamily("redrive_breaker_failure_ratio", "Failed calls in the breaker's window, 0 to 1.",
                                    labels=["dependency"])
        for name, found in breakers.items():
            b = found.breaker
            for each in State:
                state.add_metric([_label(name), each.value], 1 if b.state is each else 0)
            opened.add_metric([_label(name)], time_open(b, found.at))
            failing.add_metric([_label(name)], failure_percent(b.window) / 100)
        yield from (state, opened, failing)
