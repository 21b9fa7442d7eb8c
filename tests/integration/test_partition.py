"""A worker on a network host of its own (a network namespace the test
creates, as a second machine would be) is cut off from PostgreSQL mid-job
and reconnected after its lease expired. Another worker takes the job over
and ends it; the cut-off worker's late outcome is refused (fenced by the
lease), the job ends once, and the cut-off worker goes back to work."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from redrive import Client, Settings, Status
from redrive.core.states import TERMINAL
from redrive.store.postgres.store import PostgresStore
from redrive.testing import wait_for
from tests.apps.drain import app as drain_app
from tests.figures import record
from tests.integration.processes import WorkerProcess, executions
from tests.network import Link

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture
def link() -> Iterator[Link]:
    made = Link()
    yield made
    made.remove()


def test_a_partitioned_worker_s_late_outcome_is_refused(cluster, link: Link, tmp_path: Path, workers) -> None:
    cluster.serve(link)
    with closing(PostgresStore(cluster.url, check_schema=False)) as migrating:
        migrating.migrate()
    remote_url = cluster.url.replace("127.0.0.1", link.host)
    client = Client(drain_app.registry, settings=Settings.load(database_url=cluster.url))
    held = client.enqueue("sleep_then_record", kwargs={"key": "held", "seconds": 4}).job
    cut_off = WorkerProcess(remote_url, tmp_path, "--lease-ttl", "2s", "--poll-interval", "0.1",
                            "--queue", "default", "--queue", "remote", prefix=link.prefix)
    workers.append(cut_off)
    wait_for(lambda: (client.job(held.id).lease_owner or "").split(":")[1:2] == [str(cut_off.pid)], timeout=30)
    # and its body running there: a claim whose answer is cut on its way leaves the worker nothing to lose
    wait_for(lambda: executions(tmp_path, kind="began")["held"], timeout=30, what="the job begun")
    # When the worker's machine is cut off mid-job
    link.cut()
    workers.append(WorkerProcess(cluster.url, tmp_path, "--lease-ttl", "2s", "--poll-interval", "0.1"))
    # Then another worker takes the job over once the lease expires, and ends it
    wait_for(lambda: client.job(held.id).status is Status.SUCCEEDED, timeout=60, every=0.1)
    finisher = client.job(held.id)
    # And when the cut-off worker is reconnected, its late outcome is refused
    link.heal()
    wait_for(lambda: "lost the lease" in cut_off.log, timeout=60, every=0.2)
    endings = [e for e in client.job_events(held.id) if e.to_status in TERMINAL]
    ran = executions(tmp_path)
    record("worker partitioned from PostgreSQL", "runs of the job (at-least-once)", ran["held"])
    record("worker partitioned from PostgreSQL", "endings of the job", len(endings), "1")
    assert len(endings) == 1 and finisher.attempts == 2
    last_run = [e for e in client.job_events(held.id) if e.to_status == "running"][-1]
    assert f":{cut_off.pid}:" not in last_run.meta["worker"]  # the job ended from the other worker's run
    assert client.job(held.id).finished_at == finisher.finished_at  # nothing rewrote it
    # And it goes back to work: a job only it serves is done
    back = client.enqueue("record", args=["after"], queue="remote").job
    wait_for(lambda: client.job(back.id).status is Status.SUCCEEDED, timeout=60, every=0.1)
    assert cut_off.process.poll() is None
    client.close()
