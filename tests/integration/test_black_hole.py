"""A partition between a worker (or a client) and PostgreSQL, as a black
hole: a proxy in front of a throwaway cluster stops forwarding and closes
nothing, so every call waits on an answer that does not come. The deadline
on every store call turns that wait into an error within a stated time; a
worker that stops hearing the database gives up its leases after one TTL;
SIGTERM ends it within its grace plus one TTL; a late write is refused."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest

from redrive import Client, Job, Settings, Status, StoreTimeout
from redrive.store.postgres.store import PostgresStore
from redrive.testing import wait_for
from tests.apps.drain import app as drain_app
from tests.fakes.blackhole import BlackHole, black_hole
from tests.figures import record
from tests.integration.processes import WorkerProcess, executions

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

TTL_S, GRACE_S = 3.0, 1.0
LOST_CONTACT = ("did not answer", "heartbeat failed", "claim failed")


@pytest.fixture
def hole(cluster) -> Iterator[BlackHole]:
    with closing(PostgresStore(cluster.url, check_schema=False)) as migrating:
        migrating.migrate()
    with black_hole("127.0.0.1", cluster.port) as proxy:
        yield proxy


def _through(proxy: BlackHole, cluster) -> str:
    return cluster.url.replace(f":{cluster.port}/", f":{proxy.port}/")


def _worker(url: str, tmp_path: Path, *more: str) -> WorkerProcess:
    worker = WorkerProcess(url, tmp_path, "--lease-ttl", f"{TTL_S}s", "--shutdown-grace", f"{GRACE_S}s",
                           "--poll-interval", "0.1", *more)
    worker.wait_started()
    return worker


def _running_beyond(hole: BlackHole, cluster, tmp_path: Path, workers: list, *, key: str,
                    seconds: float) -> tuple[Client, Job, WorkerProcess]:
    """A job (its first run sleeps ``seconds``) running on a worker whose link goes through ``hole``."""
    client = Client(drain_app.registry, settings=Settings.load(database_url=cluster.url))
    job = client.enqueue("sleep_then_record", kwargs={"key": key, "seconds": seconds, "first_attempt_only": True}).job
    cut_off = _worker(_through(hole, cluster), tmp_path)
    workers.append(cut_off)
    # Its body running, not just its row saying so: a claim whose answer had not
    # reached the worker when the link was cut leaves the worker no run to give up.
    wait_for(lambda: executions(tmp_path, kind="began")[key], timeout=30, what=f"job {key} begun")
    return client, job, cut_off


def test_sigterm_during_a_partition_ends_the_worker_within_its_grace_and_one_ttl(
        cluster, hole: BlackHole, tmp_path: Path, workers) -> None:
    client, job, cut_off = _running_beyond(hole, cluster, tmp_path, workers, key="long", seconds=30)
    # When the worker's link to the database goes dark mid-job
    hole.cut()
    cut_at = time.monotonic()
    # Then it says so within one lease TTL
    wait_for(lambda: any(line in cut_off.log for line in LOST_CONTACT), timeout=TTL_S, every=0.05,
             what="the lost contact logged")
    told_s = time.monotonic() - cut_at
    # And when it is asked to stop, it ends within its grace plus one TTL, whatever the database does
    cut_off.signal(signal.SIGTERM)
    asked = time.monotonic()
    cut_off.process.wait(timeout=GRACE_S + TTL_S + 30)
    stopped_s = time.monotonic() - asked
    record("worker in a black-hole partition", "lost contact logged after (s)", f"{told_s:.1f}", f"< {TTL_S}")
    record("worker in a black-hole partition", "SIGTERM to exit (s)", f"{stopped_s:.1f}", f"< {GRACE_S + TTL_S}")
    assert stopped_s < GRACE_S + TTL_S, cut_off.log[-3000:]
    assert executions(tmp_path)["long"] == 0  # its body did not run on to the end
    # And after the heal, another worker takes the job over and ends it once
    hole.heal()
    workers.append(_worker(cluster.url, tmp_path))
    wait_for(lambda: client.job(job.id).status is Status.SUCCEEDED, timeout=60, every=0.1)
    assert executions(tmp_path)["long"] == 1 and client.job(job.id).attempts == 2
    client.close()


def test_a_late_result_from_a_worker_whose_lease_expired_is_not_taken(
        cluster, hole: BlackHole, tmp_path: Path, workers) -> None:
    client, job, cut_off = _running_beyond(hole, cluster, tmp_path, workers, key="late", seconds=2)
    # When the link goes dark for longer than the lease, and nobody else reclaims the job meanwhile
    hole.cut()
    wait_for(lambda: "it was not extended" in cut_off.log, timeout=2 * TTL_S, every=0.1,
             what="the worker giving the run up")
    time.sleep(1)  # a window the test holds open: the run's outcome, if any, waits in the black hole
    hole.heal()
    # Then the job is ended by a later run, never by the one whose lease expired
    wait_for(lambda: client.job(job.id).status is Status.SUCCEEDED, timeout=60, every=0.1)
    done = client.job(job.id)
    assert done.attempts == 2, [(e.from_status, e.to_status, e.meta) for e in client.job_events(job.id)]
    endings = [e for e in client.job_events(job.id) if e.from_status is Status.RUNNING]
    assert [e.to_status for e in endings] == [Status.QUEUED, Status.SUCCEEDED]
    assert endings[0].meta.get("reason") == "lease_expired"
    assert cut_off.process.poll() is None  # and the worker went back to work
    client.close()


def test_an_enqueue_through_a_partitioned_pool_fails_within_its_stated_time(cluster, hole: BlackHole) -> None:
    deadline = timedelta(seconds=2)
    client = Client(drain_app.registry, settings=Settings.load(database_url=_through(hole, cluster),
                                                               store_timeout=deadline))
    client.enqueue("record", args=["before"])  # the pool's connection is open before the partition
    hole.cut()
    began = time.monotonic()
    with pytest.raises(StoreTimeout) as caught:
        client.enqueue("record", args=["during"], idempotency_key="once")
    took = time.monotonic() - began
    record("enqueue in a black-hole partition", "seconds to fail (store_timeout 2 s)", f"{took:.1f}", "< 3")
    assert took < deadline.total_seconds() + 1
    assert caught.value.code == "STORE_TIMEOUT"
    assert "may or may not have been created" in str(caught.value) and "idempotency key" in str(caught.value)
    # And once healed, repeating it with the same key makes one job
    hole.heal()
    again = wait_for(lambda: _try_enqueue(client), timeout=30, what="an enqueue after the heal")
    direct = Client(drain_app.registry, settings=Settings.load(database_url=cluster.url))
    keyed = [j for j in direct.jobs(task="record").items if j.args == ["during"]]
    assert [j.id for j in keyed] == [again.job.id]
    client.close()
    direct.close()


def _try_enqueue(client: Client):
    try:
        return client.enqueue("record", args=["during"], idempotency_key="once")
    except StoreTimeout:
        return None
    except Exception as exc:  # the pool is still reconnecting
        if getattr(exc, "code", "").startswith("STORE_"):
            return None
        raise
