"""A worker on a network host of its own (a network namespace the test
creates, as a second machine would be) is cut off from PostgreSQL mid-job
and reconnected after its lease expired. Another worker takes the job over
and ends it; the cut-off worker's late outcome is refused (fenced by the
lease), the job ends once, and the cut-off worker goes back to work."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from redrive import Client, Settings, Status
from redrive.core.states import TERMINAL
from redrive.store.postgres.store import PostgresStore
from redrive.testing import wait_for
from tests.apps.drain import app as drain_app
from tests.conftest import IN_CI
from tests.figures import record
from tests.integration.processes import WorkerProcess, executions

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

# A link of this pytest process's own (tests run side by side): its names
# and its /30 are drawn from the process id.
_NET = f"10.213.{os.getpid() % 250 + 1}"
HOST, REMOTE, NETWORK = f"{_NET}.1", f"{_NET}.2", f"{_NET}.0/30"


class Link:
    """A network namespace joined to this host by a veth pair."""

    def __init__(self) -> None:
        tag = str(os.getpid())[-6:]
        self.namespace, self.host_end, self.remote_end = f"rd{tag}", f"rdh{tag}", f"rdr{tag}"
        self._ip("netns", "add", self.namespace)
        self._ip("link", "add", self.host_end, "type", "veth", "peer", "name", self.remote_end)
        self._ip("link", "set", self.remote_end, "netns", self.namespace)
        self._ip("addr", "add", f"{HOST}/30", "dev", self.host_end)
        self._ip("link", "set", self.host_end, "up")
        self.inside("ip", "addr", "add", f"{REMOTE}/30", "dev", self.remote_end)
        self.inside("ip", "link", "set", self.remote_end, "up")
        self.inside("ip", "link", "set", "lo", "up")

    @staticmethod
    def _ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)

    def inside(self, *command: str) -> None:
        subprocess.run(["ip", "netns", "exec", self.namespace, *command], check=True, capture_output=True, timeout=10)

    @property
    def prefix(self) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.namespace)

    def cut(self) -> None:
        self._ip("link", "set", self.host_end, "down")

    def heal(self) -> None:
        self._ip("link", "set", self.host_end, "up")

    def remove(self) -> None:
        subprocess.run(["ip", "link", "del", self.host_end], capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", self.namespace], capture_output=True, timeout=10)


@pytest.fixture
def link() -> Iterator[Link]:
    if shutil.which("ip") is None or os.geteuid() != 0:
        message = "a network namespace needs iproute2 and root"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    made = Link()
    yield made
    made.remove()


def test_a_partitioned_worker_s_late_outcome_is_refused(cluster, link: Link, tmp_path: Path, workers) -> None:
    cluster.serve(HOST, NETWORK)
    with closing(PostgresStore(cluster.url, check_schema=False)) as migrating:
        migrating.migrate()
    remote_url = cluster.url.replace("127.0.0.1", HOST)
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
