"""A primary and its standby named in one URL (libpq's multi-host form):
when the primary dies and the standby is promoted, a worker and a client
find the new primary by themselves, and a server that takes no writes (a
standby not yet promoted) reads as the database being unavailable, never as
a task's or a caller's mistake. On servers of the test's own
(tests/cluster.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from redrive import Client, Settings, Status
from redrive.errors import StoreUnavailable
from redrive.store.postgres.store import PostgresStore
from redrive.testing import wait_for
from tests.apps.drain import app as drain_app
from tests.cluster import Cluster
from tests.figures import record
from tests.integration.processes import WorkerProcess

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

RESUMED_S = 10  # the bound: workers run jobs again within 10 s of the promotion


@pytest.fixture
def pair() -> Iterator[tuple[Cluster, Cluster]]:
    """A primary with redrive's schema, and a synchronous standby of it."""
    primary = Cluster()
    standby = None
    try:
        with closing(PostgresStore(primary.url, check_schema=False)) as migrating:
            migrating.migrate()
        standby = Cluster(standby_of=primary)
        primary.synchronous()
        yield primary, standby
    finally:
        for made in (standby, primary):
            if made is not None:
                made.remove()


def _both(primary: Cluster, standby: Cluster, **options: str) -> str:
    query = "&".join(f"{key}={value}" for key, value in options.items())
    return (f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/postgres"
            + (f"?{query}" if query else ""))


def _enqueued(client: Client, marker: str, within: float) -> tuple[object, float]:
    """A job enqueued as soon as the database takes it: the job and when."""
    deadline = time.monotonic() + within
    while True:
        try:
            return client.enqueue("record", args=[marker]).job, time.monotonic()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_a_worker_and_a_client_find_the_promoted_standby_by_themselves(
    pair: tuple[Cluster, Cluster], tmp_path: Path, workers: list[WorkerProcess],
) -> None:
    primary, standby = pair
    url = _both(primary, standby)  # no target_session_attrs: redrive asks for the writable one itself
    client = Client(drain_app.registry, settings=Settings.load(database_url=url))
    before = client.enqueue("record", args=["before"]).job
    workers.append(WorkerProcess(url, tmp_path, "--poll-interval", "0.2", "--lease-ttl", "10s"))
    wait_for(lambda: client.job(before.id).status is Status.SUCCEEDED, timeout=30)

    primary.stop("immediate")  # a crash: nothing is closed cleanly
    standby.promote()
    promoted = time.monotonic()
    after, taken = _enqueued(client, "after", within=RESUMED_S)
    wait_for(lambda: client.job(after.id).status is Status.SUCCEEDED, timeout=RESUMED_S * 3, every=0.05)
    resumed = time.monotonic() - promoted
    record("failover to a synchronous standby", "enqueue taken after the promotion (s)",
           f"{taken - promoted:.2f}", f"< {RESUMED_S}")
    record("failover to a synchronous standby", "a job run after the promotion (s)", f"{resumed:.2f}",
           f"< {RESUMED_S}")
    assert resumed < RESUMED_S
    # nothing acknowledged before the crash was lost (the standby confirmed each commit)
    assert client.job(before.id).status is Status.SUCCEEDED
    assert workers[0].process.poll() is None
    log = workers[0].log
    assert "Traceback" not in log, log
    # each connection of the worker's found the promoted standby; said once
    assert log.count(f"connections now reach 127.0.0.1:{standby.port}") == 1, log
    assert "LISTEN connection back" in log, log
    client.close()


def test_a_standby_not_yet_promoted_is_the_database_unavailable(pair: tuple[Cluster, Cluster]) -> None:
    _, standby = pair
    # A URL that leads to the standby alone: it answers, but takes no writes
    with closing(PostgresStore(standby.url)) as store:
        client = Client(drain_app.registry, store=store)
        with pytest.raises(StoreUnavailable) as refused:
            client.enqueue("record", args=["x"])
        message = str(refused.value)
        assert "read-only" in message and "\n" not in message, message
