"""A primary and its standby named in one URL (libpq's multi-host form):
when the primary dies and the standby is promoted, a worker, a client and
the HTTP API find the new primary by themselves, and a server that takes no writes (a
standby not yet promoted) reads as the database being unavailable, never as
a task's or a caller's mistake. On servers of the test's own
(tests/cluster.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, closing
from pathlib import Path

import httpx
import pytest

from redrive import App, Client, Settings, Status
from redrive.errors import StoreUnavailable
from redrive.http import TokenAuth, create_api
from redrive.http.auth import parse_tokens
from redrive.store.postgres.store import PostgresStore
from redrive.testing import wait_for
from tests.apps.drain import app as drain_app
from tests.cluster import Cluster
from tests.figures import record
from tests.http.conftest import SPECS, TOKENS, serving
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


def _answered(client: httpx.Client, path: str, within: float) -> float:
    """When the API first answers ``path`` with 200 (each failure a 503 or no answer)."""
    deadline = time.monotonic() + within
    while True:
        try:
            if client.get(path).status_code == 200:
                return time.monotonic()
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"the API did not answer {path} within {within} s of the promotion")
        time.sleep(0.1)


def test_a_worker_a_client_and_the_api_find_the_promoted_standby_by_themselves(
    pair: tuple[Cluster, Cluster], tmp_path: Path, workers: list[WorkerProcess],
) -> None:
    with ExitStack() as stack:
        _fail_over(pair, tmp_path, workers, stack)


def _fail_over(pair: tuple[Cluster, Cluster], tmp_path: Path, workers: list[WorkerProcess], stack: ExitStack) -> None:
    primary, standby = pair
    url = _both(primary, standby)  # no target_session_attrs: redrive asks for the writable one itself
    client = Client(drain_app.registry, settings=Settings.load(database_url=url))
    before = client.enqueue("record", args=["before"]).job
    workers.append(WorkerProcess(url, tmp_path, "--poll-interval", "0.2", "--lease-ttl", "10s"))
    wait_for(lambda: client.job(before.id).status is Status.SUCCEEDED, timeout=30)

    served = App(database_url=url)  # redrive serve's: the API on its own store
    api = stack.enter_context(serving(create_api(served, auth=TokenAuth(parse_tokens(SPECS)))))
    stack.callback(served.close)
    operator = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {TOKENS['operator']}"}, timeout=5)
    stack.callback(operator.close)
    assert operator.get(f"/api/v1/jobs/{before.id}").status_code == 200

    primary.stop("immediate")  # a crash: nothing is closed cleanly
    standby.promote()
    promoted = time.monotonic()
    after, taken = _enqueued(client, "after", within=RESUMED_S)
    answered = _answered(operator, f"/api/v1/jobs/{after.id}", within=RESUMED_S)
    wait_for(lambda: client.job(after.id).status is Status.SUCCEEDED, timeout=RESUMED_S * 3, every=0.05)
    resumed = time.monotonic() - promoted
    record("failover to a synchronous standby", "enqueue taken after the promotion (s)",
           f"{taken - promoted:.2f}", f"< {RESUMED_S}")
    record("failover to a synchronous standby", "a job run after the promotion (s)", f"{resumed:.2f}",
           f"< {RESUMED_S}")
    record("failover to a synchronous standby", "the API answering after the promotion (s)",
           f"{answered - promoted:.2f}", f"< {RESUMED_S}")
    assert resumed < RESUMED_S and answered - promoted < RESUMED_S
    # nothing acknowledged before the crash was lost (the standby confirmed each commit)
    assert client.job(before.id).status is Status.SUCCEEDED
    assert workers[0].process.poll() is None
    log = workers[0].log
    assert "Traceback" not in log, log
    # each connection of the worker's found the promoted standby; said once
    assert log.count(f"connections now reach 127.0.0.1:{standby.port}") == 1, log
    # and its LISTEN connection too (it tries again every second; jobs are polled for meanwhile)
    wait_for(lambda: "LISTEN connection back" in workers[0].log, timeout=RESUMED_S, what="LISTEN back")
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
