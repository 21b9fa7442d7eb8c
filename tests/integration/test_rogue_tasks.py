"""Whatever a task raises or returns, its ending becomes that job's outcome
and nothing more: the worker goes on, and the other jobs are untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from redrive import Client, JobRequest, Settings, Status
from redrive.testing import wait_for
from tests.apps.rogue import app as rogue
from tests.integration.processes import WorkerProcess

ROGUES = {
    "exits": ("BUG", "SystemExit: 0"),
    "interrupts": ("BUG", "KeyboardInterrupt"),
    "exits_async": ("BUG", "SystemExit: 3"),
    "too_deep": ("RESULT_NOT_JSON", "the result: nested deeper than 64 levels"),
    "unprintable": ("BUG", "Unprintable: (its message could not be read)"),
}


@pytest.mark.parametrize("task", sorted(ROGUES))
def test_a_rogue_task_fails_its_own_job_and_the_worker_goes_on(
    task: str, sqlite_url: str, tmp_path: Path, workers: list[WorkerProcess],
) -> None:
    client = Client(rogue.registry, settings=Settings.load(database_url=sqlite_url))
    # Given a rogue job between two plain ones, on a worker running one at a time
    before, rogue_job, after = client.enqueue_many(
        [JobRequest("fine"), JobRequest(task, max_attempts=1), JobRequest("fine")])
    workers.append(WorkerProcess(sqlite_url, tmp_path, "-c", "1", "--poll-interval", "0.1",
                                 app="tests.apps.rogue:app"))
    # When the worker runs them all
    wait_for(lambda: client.job(after.job.id).status is Status.SUCCEEDED, timeout=30)
    # Then the rogue job failed with what happened, recorded, and nothing else changed
    failed = client.job(rogue_job.job.id)
    code, phrase = ROGUES[task]
    assert (failed.status, failed.error_code) == (Status.FAILED, code)
    assert phrase in failed.error_message
    assert client.job(before.job.id).status is Status.SUCCEEDED
    assert workers[0].process.poll() is None, "the task stopped its worker"
    assert workers[0].stop() == 0
    assert "Task exception was never retrieved" not in workers[0].log
    client.close()


def test_an_async_task_that_holds_the_event_loop_keeps_its_lease_and_is_named(
    sqlite_url: str, tmp_path: Path, workers: list[WorkerProcess],
) -> None:
    client = Client(rogue.registry, settings=Settings.load(database_url=sqlite_url))
    hog = client.enqueue("hogs_loop", args=[5.0]).job
    # Two workers: if the first lost its lease while its loop was held, the other would take the job
    options = ("--lease-ttl", "1.5s", "--poll-interval", "0.1")
    workers.append(WorkerProcess(sqlite_url, tmp_path, *options, app="tests.apps.rogue:app"))
    wait_for(lambda: client.job(hog.id).status is Status.RUNNING, timeout=30)
    workers.append(WorkerProcess(sqlite_url, tmp_path, *options, app="tests.apps.rogue:app"))
    wait_for(lambda: client.job(hog.id).status is Status.SUCCEEDED, timeout=60)
    # The heartbeats went on beside the held loop: one run, never reclaimed
    assert client.job(hog.id).attempts == 1
    log = workers[0].log
    assert "the event loop has been blocked" in log and "hogs_loop" in log, log
    assert "the event loop answers again" in log
    client.close()


def test_a_worker_whose_loop_stays_held_still_stops_giving_its_jobs_back(
    sqlite_url: str, tmp_path: Path, workers: list[WorkerProcess],
) -> None:
    import signal
    import time

    client = Client(rogue.registry, settings=Settings.load(database_url=sqlite_url))
    hog = client.enqueue("hogs_loop", args=[120.0]).job
    workers.append(WorkerProcess(sqlite_url, tmp_path, "--shutdown-grace", "2s", "--poll-interval", "0.1",
                                 app="tests.apps.rogue:app"))
    wait_for(lambda: client.job(hog.id).status is Status.RUNNING, timeout=30)
    time.sleep(0.5)  # a window, not a wait: the claimed task gets to hold the loop (it tells nobody)
    asked = time.monotonic()
    workers[0].signal(signal.SIGTERM)
    code = workers[0].process.wait(timeout=30)
    # It ended within its grace and a beat, and the job is back in the queue for another worker
    assert time.monotonic() - asked < 6
    assert code == 70
    assert client.job(hog.id).status is Status.QUEUED
    assert "gave back 1 jobs and ended the process" in workers[0].log
    client.close()
