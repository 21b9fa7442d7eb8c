"""A worker whose own clock runs a minute ahead shares a SQLite file with an
honest one. Leases and due times follow the database's clock (the kernel's
stamp on a file beside the database), so the skewed worker neither takes
the live lease of a running job nor runs a delayed job early."""

from __future__ import annotations

from datetime import timedelta

import pytest

from redrive import Client, Settings, Status
from redrive.testing import wait_for
from tests.apps.drain import app as drain_app
from tests.figures import record
from tests.integration.processes import WorkerProcess, executions

AHEAD = ("faketime", "-f", "+60s")


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_a_worker_with_its_clock_ahead_takes_no_live_lease_and_runs_nothing_early(
    faketime, tmp_path, workers,
) -> None:
    url = f"sqlite:///{tmp_path / 'redrive.db'}"
    client = Client(drain_app.registry, settings=Settings.load(database_url=url))
    try:
        workers.append(WorkerProcess(url, tmp_path, "--lease-ttl", "3s", "--poll-interval", "0.1"))
        long = client.enqueue("sleep_then_record", args=["long", 8.0]).job
        wait_for(lambda: client.job(long.id).status is Status.RUNNING, timeout=30)
        delayed = client.enqueue("record", args=["delayed"], delay=timedelta(seconds=40)).job

        # The skewed worker also serves a queue of its own, to show it claims.
        workers.append(WorkerProcess(url, tmp_path, "--lease-ttl", "3s", "--poll-interval", "0.1",
                                     "--queue", "default", "--queue", "skewed", prefix=AHEAD))
        probe = client.enqueue("record", args=["probe"], queue="skewed").job
        wait_for(lambda: client.job(probe.id).status is Status.SUCCEEDED, timeout=30)
        assert "+60s" in " ".join(workers[1].process.args)  # the probe ran under the skewed clock

        wait_for(lambda: client.job(long.id).status is Status.SUCCEEDED, timeout=30)
        ran = executions(tmp_path)
        record("SQLite, a worker's clock +60 s", "runs of a job holding a live lease", ran["long"], "1")
        record("SQLite, a worker's clock +60 s", "delayed jobs run early", ran["delayed"], "0")
        assert ran["long"] == 1, f"the long job ran {ran['long']} times: its live lease was taken"
        assert client.job(long.id).attempts == 1
        assert client.job(delayed.id).status is Status.SCHEDULED, "the delayed job ran early"
        assert ran["delayed"] == 0
    finally:
        client.close()
