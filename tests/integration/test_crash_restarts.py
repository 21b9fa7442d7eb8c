"""PostgreSQL crashes (pg_ctl -m immediate, recovery on restart) while
worker processes drain jobs: three crash-restarts, and every job still ends
exactly once, through legal transitions, with nothing lost. On a server of
the test's own (tests/cluster.py)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from redrive import Actor, Admin, Client, JobRequest, Settings, Status
from redrive.core.states import TERMINAL, is_legal
from redrive.store.postgres.store import PostgresStore
from redrive.testing import wait_until
from tests.apps.drain import app as drain_app
from tests.integration.processes import WorkerProcess, executions

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

JOBS = 600


def test_three_crash_restarts_mid_drain_lose_nothing(cluster, tmp_path: Path, workers: list[WorkerProcess]) -> None:
    PostgresStore(cluster.url, check_schema=False).migrate()
    client = Client(drain_app.registry, settings=Settings.load(database_url=cluster.url))
    keys = [f"k{n}" for n in range(JOBS)]
    ids = [r.job.id for r in client.enqueue_many(
        [JobRequest("sleep_then_record", kwargs={"key": key, "seconds": 0.05}) for key in keys])]
    client.close()
    workers += [WorkerProcess(cluster.url, tmp_path, "-c", "8", "--poll-interval", "0.2", "--lease-ttl", "3s")
                for _ in range(2)]
    for _ in range(3):
        time.sleep(1.5)  # jobs in flight, outcomes being written
        cluster.stop("immediate")  # a crash: no checkpoint, recovery on start
        time.sleep(2)
        cluster.start()
    with Admin.open(cluster.url, actor=Actor.operator("test")) as admin:
        wait_until(lambda: not any(sum(q.counts.values()) for q in admin.queues()), timeout=180, every=0.5)
        jobs = {job_id: admin.store.job_get(job_id=job_id) for job_id in ids}
        histories = {job_id: admin.store.job_events_list(job_id=job_id) for job_id in ids}
    for worker in workers:
        assert worker.process.poll() is None, worker.log  # they rode it out
    # Nothing lost, one ending each, legal transitions only, and every success ran
    assert all(job is not None and job.status is Status.SUCCEEDED for job in jobs.values())
    assert all(sum(e.to_status in TERMINAL for e in h) == 1 for h in histories.values())
    assert all(is_legal(e.from_status, e.to_status) for h in histories.values() for e in h)
    ran = executions(tmp_path)
    assert set(ran) == set(keys)
    print(f"\n{JOBS} jobs, 3 crash-restarts: lost 0, reruns {sum(1 for n in ran.values() if n > 1)}",
          Counter(min(n, 3) for n in ran.values()))
