"""What the skewed-clock scenarios share (one store each: test_skewed_clock
on SQLite, test_skewed_clocks_postgres): an honest worker holding a live
lease on a long job and a job delayed 40 s, started before any skewed
worker; then, once they are done, that neither was run by a skewed one."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from redrive import Client, Status
from redrive.testing import wait_for
from tests.figures import record
from tests.integration.processes import WorkerProcess, executions


def lease_and_delay(client: Client, url: str, tmp_path: Path, workers: list[WorkerProcess]) -> tuple[Any, Any]:
    """The long job, running on an honest worker with a 3 s lease, and the delayed one."""
    workers.append(WorkerProcess(url, tmp_path, "--lease-ttl", "3s", "--poll-interval", "0.1"))
    long = client.enqueue("sleep_then_record", args=["long", 8.0]).job
    wait_for(lambda: client.job(long.id).status is Status.RUNNING, timeout=30)
    delayed = client.enqueue("record", args=["delayed"], delay=timedelta(seconds=40)).job
    return long, delayed


def assert_lease_kept_and_nothing_early(client: Client, tmp_path: Path, scenario: str, long: Any,
                                        delayed: Any) -> None:
    wait_for(lambda: client.job(long.id).status is Status.SUCCEEDED, timeout=30)
    ran = executions(tmp_path)
    record(scenario, "runs of a job holding a live lease", ran["long"], "1")
    record(scenario, "delayed jobs run early", ran["delayed"], "0")
    assert ran["long"] == 1, f"the long job ran {ran['long']} times: its live lease was taken"
    assert client.job(long.id).attempts == 1
    assert client.job(delayed.id).status is Status.SCHEDULED and ran["delayed"] == 0, "the delayed job ran early"
