"""Whatever a task raises or returns, its ending becomes that job's outcome
and nothing more: the worker goes on, and the other jobs are untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from redrive import Client, JobRequest, Settings, Status
from redrive.testing import wait_until
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
    wait_until(lambda: client.job(after.job.id).status is Status.SUCCEEDED, timeout=30)
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
