"""What the store holds now, read at each scrape: the gauges of queues,
dead letters, workers and breakers, the same from every process that serves
them."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from redrive.admin import Actor
from redrive.app import App
from redrive.core.breaker import State, failure_percent, time_open
from redrive.core.states import Status
from redrive.errors import RedriveError
from redrive.metrics.tally import label
from redrive.store.port import REPLACED_BECAUSE, WORKER_STALE_AFTER_S

log = logging.getLogger("redrive.metrics")


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
            name = label(q.queue)
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
            open_letters.add_metric([label(task), label(error_class)], count)
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
                per_worker.add_metric([label(worker.id)], worker.running)
                orphaned.add_metric([label(worker.id)], worker.orphaned)
                continue
            children.add_metric([label(worker.id)], worker.children)
            for reason in REPLACED_BECAUSE:
                replaced.add_metric([label(worker.id), reason], worker.restarts_by.get(reason, 0))
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
                state.add_metric([label(name), each.value], 1 if b.state is each else 0)
            opened.add_metric([label(name)], time_open(b, found.at))
            failing.add_metric([label(name)], failure_percent(b.window) / 100)
        yield from (state, opened, failing)
