"""Real worker processes, real signals: nothing is lost and nothing ends twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from redrive import Client, JobRequest, Settings, Status
from redrive.store.url import open_store
from redrive.testing import count_jobs, wait_for
from tests.apps.drain import app as drain_app
from tests.conftest import every_job
from tests.integration.processes import REPO, WorkerProcess, executions

pytestmark = pytest.mark.slow


def _client(url: str) -> Client:
    """This process enqueues and reads with the declarations the workers run."""
    return Client(drain_app.registry, settings=Settings.load(database_url=url))


def _start(workers: list, url: str, tmp_path, *options: str) -> WorkerProcess:
    worker = WorkerProcess(url, tmp_path, *options)
    workers.append(worker)
    return worker


def _drain(url: str, tmp_path, workers: list, *, processes: int, jobs: int) -> None:
    client = _client(url)
    keys = [f"k{n}" for n in range(jobs)]
    for _ in range(processes):
        _start(workers, url, tmp_path, "--concurrency", "8", "--poll-interval", "0.2")
    # Every worker is claiming before the jobs arrive: one that started first
    # must not drain them all before the others are up.
    wait_for(lambda: all(" started: " in worker.log for worker in workers), timeout=60)
    # Each job takes 10 ms, so no one worker can drain them all between
    # another's polls (a no-op job drains a thousand in well under 0.2 s).
    client.enqueue_many([JobRequest("sleep_then_record", args=[key, 0.01]) for key in keys])

    def drained() -> bool:
        counts = count_jobs(client.store)
        return counts[Status.SUCCEEDED] == jobs

    wait_for(drained, timeout=240, every=0.25)
    for worker in workers:
        assert worker.stop() == 0, worker.log
    # Every job ran exactly once and succeeded; none is left anywhere else.
    assert executions(tmp_path) == Counter({key: 1 for key in keys})
    assert count_jobs(client.store)[Status.SUCCEEDED] == jobs
    assert sum(count_jobs(client.store).values()) == jobs
    ran_in = {job.result["pid"] for job in every_job(client)}
    assert len(ran_in) > 1, "one worker did all the work: the test proves nothing about sharing"
    client.close()


def test_four_postgres_workers_drain_2000_jobs_exactly_once(pg_url, tmp_path, workers) -> None:
    _drain(pg_url, tmp_path, workers, processes=4, jobs=2000)


def test_two_sqlite_workers_drain_1000_jobs_without_lock_errors(tmp_path, workers) -> None:
    url = f"sqlite:///{tmp_path / 'redrive.db'}"
    _drain(url, tmp_path, workers, processes=2, jobs=1000)
    for worker in workers:
        assert "locked" not in worker.log and "Traceback" not in worker.log, worker.log


def _running_on(client: Client, job_id, worker: WorkerProcess) -> bool:
    job = client.job(job_id)
    return job.status is Status.RUNNING and f":{worker.pid}:" in job.lease_owner


def test_a_killed_workers_job_is_finished_by_another(db_url, tmp_path, workers) -> None:
    client = _client(db_url)
    slow = client.enqueue("sleep_then_record", args=["slow", 60, True]).job
    a = _start(workers, db_url, tmp_path, "--lease-ttl", "1.5", "--poll-interval", "0.2")
    wait_for(lambda: _running_on(client, slow.id, a), timeout=20)
    others = [client.enqueue("record", args=[f"o{n}"]).job for n in range(5)]

    # When the worker dies mid-job without a word
    a.signal(signal.SIGKILL)
    a.process.wait(timeout=10)
    b = _start(workers, db_url, tmp_path, "--lease-ttl", "1.5", "--poll-interval", "0.2")

    # Then its lease expires, another worker finishes the job, and nothing is lost
    wait_for(lambda: client.job(slow.id).status is Status.SUCCEEDED, timeout=30)
    wait_for(lambda: all(client.job(j.id).status is Status.SUCCEEDED for j in others), timeout=30)
    done = client.job(slow.id)
    assert done.attempts == 2 and done.result["pid"] == b.pid
    reasons = [e.meta.get("reason") for e in client.job_events(slow.id)]
    assert "lease_expired" in reasons
    runs = executions(tmp_path)
    assert runs["slow"] == 1  # the first attempt died before recording
    for n, job in enumerate(others):
        # A may have run a job and died before its completion landed: at least
        # once, and a second run only after that lease expired.
        expired = "lease_expired" in [e.meta.get("reason") for e in client.job_events(job.id)]
        assert runs[f"o{n}"] in ((1, 2) if expired else (1,)), (n, runs)
    assert b.stop() == 0
    client.close()


def _pause_holding_no_lock(worker: WorkerProcess, url: str) -> None:
    """SIGSTOP, at a moment the worker is not inside a SQLite write: a writer
    frozen while it holds the database's one write lock stops every other
    process (SQLite's rule, on any engine); redrive's fencing is what the
    test is about."""
    import sqlite3
    import time

    for _ in range(100):
        worker.signal(signal.SIGSTOP)
        # The signal is only asked for: until every thread has stopped, the
        # worker may still begin a write and then freeze inside it.
        wait_for(lambda: _stopped(worker.pid), timeout=10, every=0.005, what="the worker stopping")
        if not url.startswith("sqlite"):
            return
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=0.2)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.rollback()
            return
        except sqlite3.OperationalError:  # paused mid-write: let it finish, and try again
            worker.signal(signal.SIGCONT)
            time.sleep(0.05)
        finally:
            conn.close()
    raise AssertionError("the worker held the write lock at every try")


def _stopped(pid: int) -> bool:
    """Every thread of ``pid`` stopped by a signal (state T in /proc)."""
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except OSError:  # a thread that ended meanwhile
            continue
    return bool(states) and all(state == "T" for state in states)


def test_a_paused_workers_stale_completion_is_rejected(db_url, tmp_path, workers) -> None:
    client = _client(db_url)
    job = client.enqueue("sleep_then_record", args=["paused", 3, True]).job
    a = _start(workers, db_url, tmp_path, "--lease-ttl", "1", "--poll-interval", "0.2")
    wait_for(lambda: _running_on(client, job.id, a), timeout=20)

    # Given the worker is paused past its lease, and another takes the job over
    _pause_holding_no_lock(a, db_url)
    b = _start(workers, db_url, tmp_path, "--lease-ttl", "1", "--poll-interval", "0.2")
    wait_for(lambda: client.job(job.id).status is Status.SUCCEEDED, timeout=30)

    # When the paused worker wakes up and finishes its copy
    a.signal(signal.SIGCONT)
    wait_for(lambda: f"lost the lease on job {job.id}" in a.log, timeout=20)

    # Then its completion changed nothing: one ending, B's result
    done = client.job(job.id)
    assert done.status is Status.SUCCEEDED and done.result["pid"] == b.pid
    endings = [e for e in client.job_events(job.id) if e.to_status is Status.SUCCEEDED]
    assert len(endings) == 1
    assert a.stop() == 0 and b.stop() == 0
    assert client.job(job.id).result["pid"] == b.pid
    client.close()


def test_sigterm_finishes_short_jobs_requeues_long_ones_and_claims_nothing_more(
    db_url, tmp_path, workers
) -> None:
    client = _client(db_url)
    short = [client.enqueue("sleep_then_record", args=[f"short{n}", 1.0]).job for n in range(2)]
    long = [
        client.enqueue("sleep_then_record", args=["long-sync", 60]).job,
        client.enqueue("async_sleep_then_record", args=["long-async", 60]).job,
    ]
    waiting = [client.enqueue("record", args=[f"w{n}"], priority=5).job for n in range(3)]
    w = _start(workers, db_url, tmp_path, "--concurrency", "4", "--shutdown-grace", "3",
               "--poll-interval", "0.2")
    wait_for(lambda: count_jobs(client.store)[Status.RUNNING] == 4, timeout=20)

    w.signal(signal.SIGTERM)
    assert w.process.wait(timeout=20) == 0, w.log

    for job in short:
        assert client.job(job.id).status is Status.SUCCEEDED
    for job in long:
        requeued = client.job(job.id)
        assert requeued.status is Status.QUEUED and requeued.attempts == 0
        assert client.job_events(job.id)[-1].meta == {"reason": "shutdown"}
    for job in waiting:
        # Slots freed during the grace period, yet nothing new was claimed.
        assert [e.to_status for e in client.job_events(job.id)] == [Status.QUEUED]
    assert count_jobs(client.store)[Status.RUNNING] == 0
    assert "requeued 2 unfinished jobs" in w.log
    client.close()


def test_a_fresh_client_sees_the_same_database(db_url) -> None:
    # The stores the workers open read what the test's client wrote.
    client = _client(db_url)
    job = client.enqueue("record", args=["x"]).job
    store = open_store(db_url)
    assert store.job_get(job_id=job.id).status is Status.QUEUED
    store.close()
    client.close()


def test_heartbeats_keep_a_job_longer_than_its_lease(db_url, tmp_path, workers) -> None:
    client = _client(db_url)
    # Two and a half leases long. A 1 s lease left a loaded machine's store
    # calls (up to half the TTL, at least 1 s) no room to extend it in time.
    job = client.enqueue("sleep_then_record", args=["long", 5.0]).job
    a = _start(workers, db_url, tmp_path, "--lease-ttl", "2", "--poll-interval", "0.2")
    wait_for(lambda: _running_on(client, job.id, a), timeout=20)
    # A second worker reclaims any lease that expires; it must find none.
    _start(workers, db_url, tmp_path, "--lease-ttl", "2", "--poll-interval", "0.2")
    wait_for(lambda: client.job(job.id).status is Status.SUCCEEDED, timeout=30)
    done = client.job(job.id)
    assert done.attempts == 1 and done.result["pid"] == a.pid
    assert [e.to_status for e in client.job_events(job.id)] == [
        Status.QUEUED, Status.RUNNING, Status.SUCCEEDED]
    assert executions(tmp_path) == Counter({"long": 1})
    client.close()


def test_an_enqueue_in_another_process_wakes_an_idle_worker_before_its_poll(
    db_url, tmp_path, workers,
) -> None:
    client = _client(db_url)
    warmup = client.enqueue("record", args=["warmup"]).job
    _start(workers, db_url, tmp_path, "--poll-interval", "60")
    # The worker's first claim happens at start; after that only a wake-up can
    # start a job within the minute: NOTIFY on PostgreSQL, the database's
    # data_version changing on SQLite.
    wait_for(lambda: client.job(warmup.id).status is Status.SUCCEEDED, timeout=20)
    for n in range(3):
        job_id = client.enqueue("record", args=[f"woken-{n}"]).job.id
        wait_for(lambda j=job_id: client.job(j).status is Status.SUCCEEDED, timeout=10)
    client.close()


def test_a_worker_stopped_while_it_starts_stops_cleanly(tmp_path) -> None:
    """A SIGTERM after redrive is imported but before the worker runs (a
    supervisor's quick restart) is held, and the worker stops at once with 0."""
    url = f"sqlite:///{tmp_path / 'redrive.db'}"
    code = ("import os, signal, runpy, sys\n"
            "import redrive.signals\n"
            "redrive.signals.hold_stops()\n"
            "os.kill(os.getpid(), signal.SIGTERM)  # asked before the command line is even read\n"
            "sys.argv = ['redrive', 'worker', 'tests.apps.drain:app']\n"
            "from redrive.cli import main\n"
            "raise SystemExit(main())\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "REDRIVE_DATABASE_URL": url, "PYTHONPATH": str(REPO),
                               "REDRIVE_TEST_LOG_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "stopped" in done.stderr and "Traceback" not in done.stderr
