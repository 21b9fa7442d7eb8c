"""What one process counted (``Tally``: counters and histograms kept in
plain dicts, written out when scraped) and what a supervisor adds up of its
worker processes' (``ProcessTallies``); the catalogue of counters and
histograms, their help and labels."""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from itertools import accumulate
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from redrive.core.redact import redact_text
from redrive.events import JobFailed, JobRetryScheduled, JobSucceeded

log = logging.getLogger("redrive.metrics")


# Jobs run from milliseconds to an hour: the default buckets span both
# (Prometheus' own stop at 10 s, which peers' users rebucket first thing).
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
           1800.0, 3600.0)


@lru_cache(maxsize=4096)
def label(value: Any) -> str:
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
    "redrive_workflows_ended": ("Workflows whose last step ended, by how the workflow ended "
                                "(succeeded, failed, cancelled).", ("outcome",)),
    "redrive_workflow_steps_blocked": ("Workflow steps blocked by a parent that failed for good or was "
                                       "cancelled: they wait until it is retried.", ()),
}
# An attempt's end, by its event: the outcome its duration is labelled with,
# and its counter. The event carries its queue wait (as Oban's job-stop event
# carries its queue time): one event per attempt feeds both histograms.
ENDS = {"job.succeeded": ("succeeded", "redrive_jobs_completed"),
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
            outcome, counter = ENDS[name]
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
                key = (name, tuple(label(v) for v in labels))
                counts[key] = counts.get(key, 0) + value
            for (name, labels), row in self._observed.items():
                key = (name, tuple(label(v) for v in labels))
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


