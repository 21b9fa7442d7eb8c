"""A worker whose own clock runs a minute ahead shares a SQLite file with an
honest one. Leases and due times follow the database's clock (the kernel's
stamp on a file beside the database), so the skewed worker neither takes
the live lease of a running job nor runs a delayed job early."""

from __future__ import annotations

import pytest

from redrive import Client, Settings, Status
from redrive.testing import wait_for
from tests.apps.drain import app as drain_app
from tests.integration.processes import WorkerProcess
from tests.integration.skew import assert_lease_kept_and_nothing_early, lease_and_delay


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_a_worker_with_its_clock_ahead_takes_no_live_lease_and_runs_nothing_early(
    faketime, tmp_path, workers,
) -> None:
    url = f"sqlite:///{tmp_path / 'redrive.db'}"
    client = Client(drain_app.registry, settings=Settings.load(database_url=url))
    try:
        long, delayed = lease_and_delay(client, url, tmp_path, workers)
        # The skewed worker also serves a queue of its own, to show it claims.
        workers.append(WorkerProcess(url, tmp_path, "--lease-ttl", "3s", "--poll-interval", "0.1",
                                     "--queue", "default", "--queue", "skewed", prefix=faketime("+60s")))
        probe = client.enqueue("record", args=["probe"], queue="skewed").job
        wait_for(lambda: client.job(probe.id).status is Status.SUCCEEDED, timeout=30)
        assert "+60s" in " ".join(workers[1].process.args)  # the probe ran under the skewed clock
        assert_lease_kept_and_nothing_early(client, tmp_path, "SQLite, a worker's clock +60 s", long, delayed)
    finally:
        client.close()
