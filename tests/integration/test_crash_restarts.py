"""PostgreSQL crashes (pg_ctl -m immediate, recovery on restart) while
worker processes drain jobs and a client keeps enqueueing: three
crash-restarts, and every job still ends exactly once, through legal
transitions, with nothing lost. On a server of the test's own
(tests/cluster.py).

The enqueues are checked as a Jepsen-style history: each one is logged ok
(a job came back) or indeterminate (an error: the commit may or may not
have happened). An ok enqueue must have its job; an indeterminate one may
or may not, and is then retried with the same idempotency key, which must
give exactly one job for the key whichever way the first try went."""

from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest

from redrive import Actor, Admin, Client, JobRequest, RedriveError, Settings, Status
from redrive.core.states import TERMINAL, is_legal
from redrive.store.postgres.store import PostgresStore
from redrive.testing import wait_for
from tests.apps.drain import app as drain_app
from tests.figures import record
from tests.integration.processes import WorkerProcess, executions

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

JOBS = 600


def _enqueue_until(stop: threading.Event, url: str, history: list[tuple[str, str]]) -> None:
    """Enqueue one keyed job after another, logging each try as ok or indeterminate."""
    client = Client(drain_app.registry, settings=Settings.load(database_url=url))
    n = 0
    while not stop.is_set():
        key = f"e{n}"
        n += 1
        try:
            client.enqueue("record", args=[key], idempotency_key=key)
            history.append((key, "ok"))
        except RedriveError:
            history.append((key, "indeterminate"))
        time.sleep(0.02)
    client.close()


def test_three_crash_restarts_mid_drain_lose_nothing(cluster, tmp_path: Path, workers: list[WorkerProcess]) -> None:
    with closing(PostgresStore(cluster.url, check_schema=False)) as migrating:
        migrating.migrate()
    client = Client(drain_app.registry, settings=Settings.load(database_url=cluster.url))
    keys = [f"k{n}" for n in range(JOBS)]
    ids = [r.job.id for r in client.enqueue_many(
        [JobRequest("sleep_then_record", kwargs={"key": key, "seconds": 0.05}) for key in keys])]
    workers += [WorkerProcess(cluster.url, tmp_path, "-c", "8", "--poll-interval", "0.2", "--lease-ttl", "3s")
                for _ in range(2)]
    history: list[tuple[str, str]] = []
    stop = threading.Event()
    enqueuer = threading.Thread(target=_enqueue_until, args=(stop, cluster.url, history))
    enqueuer.start()
    def ran() -> int:
        return sum(executions(tmp_path).values())

    try:
        for worker in workers:  # both up: a worker that cannot start on a database that is down stops
            wait_for(lambda: (tmp_path / f"exec-{worker.pid}.log").exists(), timeout=60,  # noqa: B023
                     what=f"worker {worker.pid} running jobs")
        for crash in range(3):
            # Jobs in flight, outcomes being written: the workers are running jobs again
            wanted = ran() + 20
            wait_for(lambda: ran() >= wanted, timeout=60, what=f"jobs running before crash {crash + 1}")  # noqa: B023
            cluster.stop("immediate")  # a crash: no checkpoint, recovery on start
            time.sleep(2)  # down for two seconds: the scenario, not a wait for something
            cluster.start()
        # The enqueuer gets through again after the last restart
        tried = len(history)
        wait_for(lambda: ("ok" in {outcome for _, outcome in history[tried:]}), timeout=60,
                 what="an enqueue after the last restart")
    finally:
        stop.set()
        enqueuer.join(60)
    # Retry every indeterminate enqueue with its key: one job per key either way
    unsure = [key for key, outcome in history if outcome == "indeterminate"]
    retried = {key: client.enqueue("record", args=[key], idempotency_key=key) for key in unsure}
    client.close()
    with Admin.open(cluster.url, actor=Actor.operator("test")) as admin:
        wait_for(lambda: not any(sum(q.counts.values()) for q in admin.queues()), timeout=180, every=0.5)
        ids += [job.id for job in admin.jobs(task="record", limit=1000).items]
        jobs = {job_id: admin.store.job_get(job_id=job_id) for job_id in ids}
        histories = {job_id: admin.store.job_events_list(job_id=job_id) for job_id in ids}
    for worker in workers:
        assert worker.process.poll() is None, worker.log  # they rode it out
    ran = executions(tmp_path)
    keyed = Counter(job.args[0] for job in jobs.values() if job is not None and job.task == "record")
    scenario = "PostgreSQL crash-restarts x3"
    record(scenario, "jobs (drained + enqueued during the crashes)", len(jobs))
    record(scenario, "enqueues ok / indeterminate", f"{len(history) - len(unsure)} / {len(unsure)}")
    record(scenario, "indeterminate enqueues that had committed", sum(r.duplicate for r in retried.values()))
    record(scenario, "lost", sum(job is None or job.status is not Status.SUCCEEDED for job in jobs.values())
           + sum(keyed[key] == 0 for key, _ in history), "0")
    record(scenario, "more than one job for a key", sum(n > 1 for n in keyed.values()), "0")
    record(scenario, "more than one ending", sum(sum(e.to_status in TERMINAL for e in h) > 1
                                                 for h in histories.values()), "0")
    # Nothing lost, one ending each, legal transitions only, and every success ran
    assert all(job is not None and job.status is Status.SUCCEEDED for job in jobs.values())
    assert all(sum(e.to_status in TERMINAL for e in h) == 1 for h in histories.values())
    assert all(is_legal(e.from_status, e.to_status) for h in histories.values() for e in h)
    # Every ok enqueue has its job; every key, ok or retried, has exactly one
    assert set(keyed) == {key for key, _ in history}
    assert all(n == 1 for n in keyed.values())
    assert set(ran) == set(keys) | set(keyed)
    record(scenario, "reruns (at-least-once, after a crash)", sum(1 for n in ran.values() if n > 1))
