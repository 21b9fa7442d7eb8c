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
import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from itertools import accumulate
from typing import Any

from redrive.errors import ConfigError

try:
    from prometheus_client import CollectorRegistry, generate_latest, start_http_server
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
    from prometheus_client.registry import Collector
    from prometheus_client.utils import floatToGoString
except ImportError as exc:  # the engine runs without the metrics extra
    raise ConfigError("metrics need the metrics extra: pip install 'redrive[metrics]'") from exc

from redrive.admin import Actor
from redrive.app import App
from redrive.core.breaker import State, failure_percent, time_open
from redrive.core.redact import redact_text
from redrive.core.states import Status
from redrive.errors import RedriveError
from redrive.events import Event, JobFailed, JobRetryScheduled, JobSucceeded
from redrive.runtime.link import Link
from redrive.runtime.plugins import Beside, Plugin, until_cancelled
from redrive.store.port import REPLACED_BECAUSE, WORKER_STALE_AFTER_S

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


_JOB = ("task", "queue")
# name: (help, labels). Names are without ``_total``: the exposition adds it.
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "redrive_jobs_enqueued": ("Jobs created by this process.", _JOB),
    "redrive_jobs_completed": ("Jobs that ended: succeeded, failed (for good) or cancelled.",
                               (*_JOB, "outcome", "error_code")),
    "redrive_job_retries_scheduled": ("Failed attempts put back on the queue.", (*_JOB, "error_code")),
    "redrive_jobs_manually_retried": ("Failed jobs retried by hand.", _JOB),
    "redrive_jobs_replayed": ("Dead letters replayed.", (*_JOB, "replay_from")),
    "redrive_dead_letters_resolved": ("Dead letters resolved without a replay.", _JOB),
    "redrive_dead_letters_opened": ("Dead letters written.", (*_JOB, "error_class")),
    "redrive_dead_letters_escalated": ("Dead letters escalated: a replay failed again the same way.",
                                       (*_JOB, "error_class")),
    "redrive_lease_losses": ("Runs whose lease was gone before they ended.", _JOB),
    "redrive_jobs_reclaimed": ("Expired leases the reclaim ended: back to the queue, or failed when no attempt "
                               "was left (also counted as failed in redrive_jobs_completed_total).", ()),
    "redrive_jobs_held": ("Jobs held back by an open breaker.", (*_JOB, "dependency")),
    "redrive_cancels_requested": ("Cancels asked of running jobs.", _JOB),
    "redrive_outbox_sends": ("Outbox side effects sent and recorded.", _JOB),
    "redrive_outbox_reconciliations": ("Sends that may have happened, looked up at the provider first.",
                                       (*_JOB, "found")),
    "redrive_outbox_unconfirmed": ("Outbox rows found marked sent without the provider's id.", _JOB),
    "redrive_notifications_undelivered": ("Notifications given up on: a channel failed for the whole "
                                          "retry time.", ("channel", "about")),
    "redrive_breaker_transitions": ("Breaker state changes.", ("dependency", "to_state")),
    "redrive_schedule_firings": ("Schedule firings enqueued.", ("schedule",)),
}
# An attempt's end, by its event: the outcome its duration is labelled with,
# and its counter. The event carries its queue wait (as Oban's job-stop event
# carries its queue time): one event per attempt feeds both histograms.
_ENDS = {"job.succeeded": ("succeeded", "redrive_jobs_completed"),
         "job.retry_scheduled": ("retried", "redrive_job_retries_scheduled"),
         "job.failed": ("failed", "redrive_jobs_completed")}
Ended = JobSucceeded | JobRetryScheduled | JobFailed
HISTOGRAMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "redrive_job_duration_seconds": ("How long attempts ran, by how they ended.", (*_JOB, "outcome")),
    "redrive_job_queue_wait_seconds": ("From when a job was due to when a worker took it.", _JOB),
}


class Tally(Collector):
    """This process's counters and histograms, kept in plain dicts and
    written out when scraped. prometheus_client's own Counter and Histogram
    take a lock per value and a label lookup per call; a worker makes three
    observations a job, and they cost it a tenth of its throughput. Label
    values are kept as they came and redacted when written out."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.bounds = tuple(sorted(buckets))
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, tuple[Any, ...]], list[float]] = {}  # a one-value cell each
        # (name, labels) -> [count per bucket..., count above the last, sum]
        self._observed: dict[tuple[str, tuple[Any, ...]], list[float]] = {}
        # What an attempt's end touches, found once per (counter, labels, outcome)
        self._ends: dict[tuple[str, tuple[Any, ...], str], tuple[list[float], list[float], list[float]]] = {}
        # Attempts' ends not counted yet: a worker hands one over per job and
        # they are counted in batches (``_count_ended``), before every scrape.
        self.ends: deque[Ended] = deque()

    def inc(self, name: str, labels: tuple[Any, ...], by: float = 1) -> None:
        with self._lock:
            self._cell(name, labels)[0] += by

    def _cell(self, name: str, labels: tuple[Any, ...]) -> list[float]:
        return self._counts.setdefault((name, labels), [0.0])

    def _row(self, name: str, labels: tuple[Any, ...]) -> list[float]:
        return self._observed.setdefault((name, labels), [0.0] * (len(self.bounds) + 2))

    BATCH = 1024

    def ended(self, event: Ended) -> None:
        """An attempt's end (``job.succeeded``, ``job.retry_scheduled`` or
        ``job.failed``): its duration, its queue wait and a counter, counted
        with others a batch at a time, and before every scrape."""
        ends = self.ends
        ends.append(event)
        if len(ends) >= self.BATCH:
            with self._lock:
                self._count_ended()

    def _count_ended(self) -> None:
        """Counts the ends handed over so far; called under the lock. The
        deque's append and popleft are atomic: ends handed over meanwhile
        wait for the next count."""
        take, bounds = self.ends.popleft, self.bounds
        for _ in range(len(self.ends)):
            event = take()
            name, task, queue = event.name, event.task, event.queue
            outcome, counter = _ENDS[name]
            labels = (task, queue, getattr(event, "error_code", "")) if outcome == "retried" else \
                (task, queue, outcome, getattr(event, "error_code", None) or "")
            rows = self._ends.get((counter, labels, outcome))
            if rows is None:
                rows = self._ends[counter, labels, outcome] = (
                    self._row("redrive_job_duration_seconds", (task, queue, outcome)),
                    self._row("redrive_job_queue_wait_seconds", (task, queue)), self._cell(counter, labels))
            durations, waits, cell = rows
            duration_s, wait_s = event.duration_s, event.wait_s
            cell[0] += 1
            if duration_s is None or wait_s is None:  # ended by the reclaim: no run of this process to time
                continue
            durations[bisect_left(bounds, duration_s)] += 1
            durations[-1] += duration_s
            waits[bisect_left(bounds, wait_s)] += 1
            waits[-1] += wait_s

    def snapshot(self) -> dict[str, Any]:
        """Its counts as JSON, for a supervisor to add up (``absorb``)."""
        with self._lock:
            self._count_ended()
            return {"bounds": list(self.bounds),
                    "counts": [[name, list(labels), cell[0]] for (name, labels), cell in self._counts.items()],
                    "observed": [[name, list(labels), row[:]] for (name, labels), row in self._observed.items()]}

    def absorb(self, snapshot: Mapping[str, Any]) -> None:
        """Add another tally's ``snapshot`` to this one's counts (what does
        not fit, from another version or other buckets, is left out)."""
        try:
            counts = [(name, tuple(labels), float(value)) for name, labels, value in snapshot["counts"]
                      if name in COUNTERS]
            same = snapshot.get("bounds") == list(self.bounds)
            observed = [(name, tuple(labels), [float(v) for v in row]) for name, labels, row in snapshot["observed"]
                        if same and name in HISTOGRAMS and len(row) == len(self.bounds) + 2]
        except (KeyError, TypeError, ValueError):
            log.warning("metrics: a worker process's counts could not be read; left out")
            return
        with self._lock:
            for name, labels, value in counts:
                self._cell(name, labels)[0] += value
            for name, labels, row in observed:
                mine = self._row(name, labels)
                mine[:] = [a + b for a, b in zip(mine, row, strict=True)]  # in place: _ends holds it

    def collect(self) -> Iterator[Metric]:
        # Values that redact alike are one series, as they read.
        counts: dict[tuple[str, tuple[str, ...]], float] = {(name, ()): 0 for name, (_, labels) in COUNTERS.items()
                                                             if not labels}
        observed: dict[tuple[str, tuple[str, ...]], list[float]] = {}
        with self._lock:
            self._count_ended()
            for (name, labels), (value,) in self._counts.items():
                key = (name, tuple(_label(v) for v in labels))
                counts[key] = counts.get(key, 0) + value
            for (name, labels), row in self._observed.items():
                key = (name, tuple(_label(v) for v in labels))
                observed[key] = [a + b for a, b in zip(observed[key], row, strict=True)] if key in observed else row[:]
        families: dict[str, Any] = {name: CounterMetricFamily(name, doc, labels=labels)
                                    for name, (doc, labels) in COUNTERS.items()}
        families |= {name: HistogramMetricFamily(name, doc, labels=labels) for name, (doc, labels) in HISTOGRAMS.items()}
        for (name, labels), value in counts.items():
            families[name].add_metric(labels, value)
        les = [*(floatToGoString(b) for b in self.bounds), "+Inf"]
        for (name, labels), row in observed.items():
            families[name].add_metric(labels, list(zip(les, accumulate(row[:-1]), strict=True)), row[-1])
        yield from families.values()


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
        }
        # An attempt's end goes straight to the tally: a worker has one a job.
        self._stops = [app.events.subscribe(self._on_event, names=self._handlers),
                       app.events.subscribe(t.ended, names=_ENDS)]

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


class ProcessTallies(Collector):
    """A supervisor's counts (``own``) and its worker processes' as each last
    reported them, summed when scraped. A child gone leaves its last counts
    in ``own``: a counter summed over processes must not go down when one is
    replaced. (A child killed loses what it counted since its last report,
    a second's worth at most.)"""

    def __init__(self, own: Tally) -> None:
        self._own = own
        self._live: dict[str, Mapping[str, Any]] = {}
        self._lock = threading.Lock()

    def reported(self, worker_id: str, snapshot: Mapping[str, Any] | None) -> None:
        """``worker_id``'s latest counts, or None once it is gone."""
        with self._lock:
            if snapshot is not None:
                self._live[worker_id] = snapshot
            elif (last := self._live.pop(worker_id, None)) is not None:
                self._own.absorb(last)

    def collect(self) -> Iterator[Metric]:
        total = Tally(self._own.bounds)
        total.absorb(self._own.snapshot())
        with self._lock:
            live = list(self._live.values())
        for snapshot in live:
            total.absorb(snapshot)
        yield from total.collect()


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
            letters = self._admin.dead_letter_facets(state="open")
            workers, now = self._admin.workers()
        except RedriveError as exc:
            log.warning("metrics: cannot read the store: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        depth = GaugeMetricFamily("redrive_queue_jobs", "Active jobs by queue and state (past 1,000 waiting, "
                                  "PostgreSQL's estimate; past 10,000, SQLite's lower bound).", labels=["queue", "state"])
        running = GaugeMetricFamily("redrive_jobs_running", "Jobs running now, by queue.", labels=["queue"])
        oldest = GaugeMetricFamily("redrive_queue_oldest_due_age_seconds",
                                   "How long the oldest due job has waited; 0 when none waits.", labels=["queue"])
        paused = GaugeMetricFamily("redrive_queue_paused", "1 while an operator has paused the queue.",
                                   labels=["queue"])
        longest = GaugeMetricFamily("redrive_queue_oldest_running_age_seconds",
                                    "How long the longest-running job has been running; 0 when none runs.",
                                    labels=["queue"])
        for q in queues:
            name = _label(q.queue)
            for status, count in q.counts.items():
                depth.add_metric([name, str(status)], count)
            running.add_metric([name], q.counts.get(Status.RUNNING, 0))
            oldest.add_metric([name], q.oldest_due_age_s or 0.0)
            paused.add_metric([name], 1 if q.paused_by is not None else 0)
            longest.add_metric([name], q.oldest_running_age_s or 0.0)
        yield from (depth, running, oldest, paused, longest)
        open_letters = GaugeMetricFamily("redrive_dead_letters_open",
                                         "Dead letters waiting for an operator, by task and error class.",
                                         labels=["task", "error_class"])
        for (task, error_class), count in sorted(letters.by_task.items()):
            open_letters.add_metric([_label(task), _label(error_class)], count)
        yield open_letters
        # Alive: reported within WORKER_STALE_AFTER_S; stale: silent longer (killed, frozen, cut off)
        states = {"alive": 0, "stale": 0}
        per_worker = GaugeMetricFamily("redrive_worker_jobs_running", "Jobs each live worker process runs now.",
                                       labels=["worker"])
        orphaned = GaugeMetricFamily("redrive_worker_orphaned_threads",
                                     "Threads of each live worker process still running a sync task abandoned at "
                                     "its time limit.", labels=["worker"])
        children = GaugeMetricFamily("redrive_supervisor_worker_processes",
                                     "Worker processes each live supervisor runs now.", labels=["supervisor"])
        replaced = CounterMetricFamily("redrive_supervisor_replacements",
                                       "Worker processes each live supervisor replaced, by why: killed past a hard "
                                       "time limit, recycled, or died.", labels=["supervisor", "reason"])
        for worker in workers:
            stale = (now - worker.heartbeat_at).total_seconds() > WORKER_STALE_AFTER_S
            states["stale" if stale else "alive"] += 1
            if stale:
                continue
            if worker.children is None:
                per_worker.add_metric([_label(worker.id)], worker.running)
                orphaned.add_metric([_label(worker.id)], worker.orphaned)
                continue
            children.add_metric([_label(worker.id)], worker.children)
            for reason in REPLACED_BECAUSE:
                replaced.add_metric([_label(worker.id), reason], worker.restarts_by.get(reason, 0))
        counted = GaugeMetricFamily("redrive_workers", "Registered worker processes, alive or stale.",
                                    labels=["state"])
        for state_name, count in states.items():
            counted.add_metric([state_name], count)
        yield from (counted, per_worker, orphaned, children, replaced)
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
