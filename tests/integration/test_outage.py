"""A PostgreSQL outage longer than the pool's reconnection backoff: workers
resume within about a second of the server's return, and say the outage
once, not once a second. On a server of the test's own (tests/cluster.py)."""

from __future__ import annotations

import time
from contextlib import closing
from pathlib import Path

import pytest

from redrive import Client, Settings, Status
from redrive.store.postgres.store import PostgresStore
from redrive.testing import wait_for
from tests.apps.drain import app as drain_app
from tests.figures import record
from tests.integration.processes import WorkerProcess

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

OUTAGE_S = 40  # the pool's own retries would be 16 s apart by now, the next one 23 s after the return


def test_a_worker_resumes_within_a_second_or_two_of_the_database_returning(
    cluster, tmp_path: Path, workers: list[WorkerProcess],
) -> None:
    with closing(PostgresStore(cluster.url, check_schema=False)) as migrating:
        migrating.migrate()
    client = Client(drain_app.registry, settings=Settings.load(database_url=cluster.url))
    first = client.enqueue("record", args=["before"]).job
    workers.append(WorkerProcess(cluster.url, tmp_path, "--poll-interval", "0.2", "--lease-ttl", "10s"))
    wait_for(lambda: client.job(first.id).status is Status.SUCCEEDED, timeout=30)
    client.close()
    # When the server is down for longer than the pool's backoff grows in
    cluster.stop()
    time.sleep(OUTAGE_S)
    cluster.start()
    back = time.monotonic()
    # Then a job enqueued at once is started within about a second
    client = Client(drain_app.registry, settings=Settings.load(database_url=cluster.url))
    after = client.enqueue("record", args=["after"]).job
    wait_for(lambda: client.job(after.id).status is Status.SUCCEEDED, timeout=60, every=0.05)
    resumed = time.monotonic() - back
    record(f"PostgreSQL down {OUTAGE_S} s", "first job done after it returns (s)", f"{resumed:.2f}", "< 2")
    assert resumed < 2.0  # claimed and run, from the server's return
    record(f"PostgreSQL down {OUTAGE_S} s", "lost", sum(client.job(j.id).status is not Status.SUCCEEDED
                                                         for j in (first, after)), "0")
    assert workers[0].process.poll() is None
    log = workers[0].log
    # And the outage was told once per service, not every second
    assert log.count("claim failed") <= 2, log
    assert "error connecting in 'redrive'" not in log
    assert "answers again after" in log
    client.close()
