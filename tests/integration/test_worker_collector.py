"""A worker process sets Python's cyclic garbage collector for a busy worker:
what it loaded to start is frozen out of every collection, and young
collections wait for many more new objects than Python's default 700. What a
failed run held does not wait for a collection."""

from __future__ import annotations

from pathlib import Path

import pytest

from redrive import Client, JobRequest, Settings, Status
from redrive.testing import count_jobs, wait_for
from tests.apps.drain import app as drain_app
from tests.integration.processes import WorkerProcess

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_worker_process_freezes_what_it_loaded_and_collects_young_objects_less_often(
        sqlite_url: str, tmp_path: Path, workers: list[WorkerProcess], processes: str) -> None:
    # Given a job that reports the collector's settings of the process running it
    client = Client(drain_app.registry, settings=Settings.load(database_url=sqlite_url))
    client.store.migrate()
    job = client.enqueue("collector").job
    # When a worker process runs it (alone, or as a supervisor's child)
    worker = WorkerProcess(sqlite_url, tmp_path, "--processes", processes, "--poll-interval", "0.1")
    workers.append(worker)
    done = wait_for(lambda: (found := client.job(job.id)).status == Status.SUCCEEDED and found, timeout=60,
                    what="the job succeeded")
    # Then that process froze thousands of start-up objects (the app, redrive,
    # their imports) and waits for 20,000 young ones before collecting them
    assert done.result["frozen"] > 10_000, done.result
    assert done.result["young"] >= 20_000, done.result
    assert (done.result["pid"] == worker.pid) == (processes == "1"), done.result
    client.close()


@pytest.mark.parametrize(("task", "keep_error"), [
    ("fail_holding", False), ("fail_holding", True), ("fail_holding_async", True)])
def test_a_failed_run_lets_go_of_what_its_frames_held(
        sqlite_url: str, tmp_path: Path, workers: list[WorkerProcess], task: str, keep_error: bool) -> None:
    # Given 16 jobs (sync, or async) that each fail holding 40 MB (and, with
    # keep_error, keeping their own error: a cycle through their frame)
    client = Client(drain_app.registry, settings=Settings.load(database_url=sqlite_url))
    client.store.migrate()
    client.enqueue_many([JobRequest(task, kwargs={"megabytes": 40, "keep_error": keep_error}) for _ in range(16)])
    # When one worker process running two at a time runs them
    workers.append(WorkerProcess(sqlite_url, tmp_path, "-c", "2", "--poll-interval", "0.1"))
    wait_for(lambda: count_jobs(client.store).get(Status.FAILED) == 16, timeout=60, what="16 jobs failed")
    report = client.enqueue("peak_memory").job
    done = wait_for(lambda: (found := client.job(report.id)).status == Status.SUCCEEDED and found, timeout=60,
                    what="the report ran")
    # Then the worker never held more than the two buffers of the two runs
    # at once: a failed run's buffer went with its run, not with a
    # garbage collection (16 of them would be 640 MB)
    assert done.result["peak_mib"] < 250, done.result
    client.close()
