"""SIGKILL at named crash points inside the engine (tests/apps/crashing.py):
after a claim commits, before and after a success is written, after a retry
is written, after a heartbeat. At each one a worker dies; a healthy worker
then finishes everything, and every job ends exactly once, through legal
transitions, having run."""

from __future__ import annotations

import subprocess

import pytest

from redrive import Actor, Admin, Client, JobRequest, Settings, Status
from redrive.core.states import TERMINAL, is_legal
from redrive.testing import wait_for
from tests.apps.crashing import app as crashing_app
from tests.figures import record
from tests.integration.processes import WorkerProcess, executions

POINTS = ("claimed", "completing", "completed", "retried", "heartbeat")
APP = "tests.apps.crashing:app"


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_a_worker_killed_at_each_crash_point_loses_nothing(db_url: str, tmp_path, workers) -> None:
    client = Client(crashing_app.registry, settings=Settings.load(database_url=db_url))
    # Attempts for every death and one more: which jobs a dying worker holds
    # depends on how fast the machine starts the next one (a slow start lets
    # the reclaim put the same jobs at the head of the queue again), and a
    # job may take every death without that being a loss.
    attempts = len(POINTS) + 2
    requests = [JobRequest("sleep_then_record", kwargs={"key": f"s{n}", "seconds": 1.5}, max_attempts=attempts)
                for n in range(4)]
    requests += [JobRequest("record", args=[f"r{n}"], max_attempts=attempts) for n in range(20)]
    requests += [JobRequest("fail_once", args=[f"f{n}"], max_attempts=attempts) for n in range(6)]
    ids = [r.job.id for r in client.enqueue_many(requests)]
    keys = {r.args[0] if r.args else r.kwargs["key"] for r in requests}
    died = {}
    for point in POINTS:
        # A TTL that a loaded machine's late heartbeats do not outlast: an expired lease is lost
        worker = WorkerProcess(db_url, tmp_path, "--lease-ttl", "3s", "--poll-interval", "0.1", "-c", "4",
                               app=APP, env={"REDRIVE_TEST_CRASH_AT": point})
        workers.append(worker)
        try:
            died[point] = worker.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            died[point] = None  # it never reached the point
    record(f"crash points ({db_url.split(':')[0]})", "points reached (worker SIGKILLed there)",
           f"{sum(code == -9 for code in died.values())} of {len(POINTS)}", "all")
    assert all(code == -9 for code in died.values()), died
    workers.append(WorkerProcess(db_url, tmp_path, "--lease-ttl", "3s", "--poll-interval", "0.1", app=APP))
    with Admin.open(db_url, actor=Actor.operator("test")) as admin:
        wait_for(lambda: not any(sum(q.counts.values()) for q in admin.queues()), timeout=120, every=0.2)
        jobs = {job_id: admin.store.job_get(job_id=job_id) for job_id in ids}
        histories = {job_id: admin.store.job_events_list(job_id=job_id) for job_id in ids}
    client.close()
    lost = sum(job is None or job.status is not Status.SUCCEEDED for job in jobs.values())
    endings = sum(sum(e.to_status in TERMINAL for e in h) != 1 for h in histories.values())
    record(f"crash points ({db_url.split(':')[0]})", "lost", lost, "0")
    record(f"crash points ({db_url.split(':')[0]})", "not exactly one ending", endings, "0")
    unfinished = {str(job_id): [(e.from_status, e.to_status, e.attempt, e.meta) for e in histories[job_id]]
                  for job_id, job in jobs.items() if job is None or job.status is not Status.SUCCEEDED}
    assert lost == 0 and endings == 0, unfinished
    assert all(is_legal(e.from_status, e.to_status) for h in histories.values() for e in h)
    assert set(executions(tmp_path)) == keys  # every success ran
