"""redrive through a real PgBouncer in transaction-pooling mode
(tests/pgbouncer.py), its pool smaller than the workers' connections: worker
processes killed with SIGKILL while they drain lose nothing and end nothing
twice; two migrations at once apply each step once; a new job wakes an idle
worker through LISTEN on a direct connection (REDRIVE_LISTEN_URL), or is
found by polling without one. The idempotent enqueue race, the outbox and
a worker running the schedules run through PgBouncer too (their tests are
marked ``pgbouncer``)."""

from __future__ import annotations

import random
import statistics
import subprocess
import sys
import time
from datetime import timedelta

import psycopg
import pytest

from redrive import Client, JobRequest, Settings, Status
from redrive.core.states import TERMINAL
from redrive.errors import StoreError
from redrive.store.postgres.store import PostgresStore
from redrive.testing import count_jobs, wait_for
from tests.apps.drain import app as drain_app
from tests.conftest import every_job
from tests.figures import record
from tests.integration.processes import REPO, WorkerProcess, executions

pytestmark = [pytest.mark.postgres]

JOBS = 2000
WORKERS = 4
KILLS = 10


def _client(url: str) -> Client:
    return Client(drain_app.registry, settings=Settings.load(database_url=url))


@pytest.mark.slow
def test_sigkills_while_four_workers_drain_2000_jobs_lose_nothing_and_end_nothing_twice(
    pgbouncer_url, pgbouncer, tmp_path, workers,
) -> None:
    client = _client(pgbouncer_url)
    keys = [f"k{n}" for n in range(JOBS)]
    # 0.1 s a job: four workers of 8 take at least 2,000 × 0.1 ÷ 32 = 6.25 s to drain, longer than
    # the 10 kills can take (at most 10 × 0.5 s of pauses), so every kill lands mid-drain however
    # fast the machine (at 0.05 s a fast machine drained the jobs before the last kills)
    ids = [r.job.id for r in client.enqueue_many(
        [JobRequest("sleep_then_record", kwargs={"key": key, "seconds": 0.1}) for key in keys])]

    def start() -> WorkerProcess:
        worker = WorkerProcess(pgbouncer_url, tmp_path, "-c", "8", "--poll-interval", "0.2", "--lease-ttl", "2s")
        workers.append(worker)
        return worker

    alive = [start() for _ in range(WORKERS)]
    for worker in alive:
        worker.wait_started(60)
    # Kills land while jobs are in flight: each victim holds jobs when it dies.
    kills_holding = 0
    for _ in range(KILLS):
        time.sleep(random.uniform(0.2, 0.5))
        victim = alive.pop(random.randrange(len(alive)))
        held = client.jobs(status=Status.RUNNING, limit=1000).items
        kills_holding += any(f":{victim.pid}:" in (job.lease_owner or "") for job in held)
        victim.kill()
        alive.append(start())
    left_when_killing_ended = count_jobs(client.store)[Status.QUEUED]

    wait_for(lambda: count_jobs(client.store)[Status.SUCCEEDED] == JOBS, timeout=240, every=0.5,
             what="every job succeeded")
    for worker in alive:
        assert worker.stop() == 0, worker.log

    jobs = {job.id: job for job in every_job(client)}
    lost = [i for i in ids if i not in jobs or jobs[i].status is not Status.SUCCEEDED]
    endings = [sum(1 for e in client.job_events(i) if e.to_status in TERMINAL) for i in ids]
    twice = sum(1 for n in endings if n != 1)
    runs = executions(tmp_path)
    record("PgBouncer transaction mode: 2,000 jobs, 4 workers, 10 SIGKILLs", "lost", len(lost), "0")
    record("PgBouncer transaction mode: 2,000 jobs, 4 workers, 10 SIGKILLs", "more than one ending", twice, "0")
    record("PgBouncer transaction mode: 2,000 jobs, 4 workers, 10 SIGKILLs", "kills of a worker holding jobs",
           kills_holding, "> 0")
    assert lost == [] and twice == 0
    assert len(jobs) == JOBS
    assert set(runs) == set(keys)  # every success ran; a killed run may have run twice (at least once)
    assert kills_holding > 0 and left_when_killing_ended > 0, "the kills did not land mid-drain"
    assert "prepared statement" not in "".join(w.log for w in workers)
    client.close()


def test_two_migrations_at_once_through_pgbouncer_apply_each_step_once(pg_empty_url, pgbouncer, monkeypatch) -> None:
    monkeypatch.setenv("REDRIVE_DATABASE_POOL_MODE", "transaction")
    url = pgbouncer.url(pg_empty_url.rsplit("/", 1)[1])
    both = [subprocess.Popen([sys.executable, "-m", "redrive", "migrate", "--database-url", url],
                             cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for _ in range(2)]
    said = [p.communicate(timeout=120)[0] for p in both]
    assert [p.returncode for p in both] == [0, 0], said
    with psycopg.connect(pg_empty_url) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM redrive_migration ORDER BY version")]
    latest = PostgresStore(pg_empty_url, check_schema=False)._migrations[-1].version
    assert versions == list(range(1, latest + 1))


def _start_latency(client: Client, worker: WorkerProcess, n: int) -> list[float]:
    """Seconds from each of ``n`` enqueues to its start, the worker idle before each."""
    warm = client.enqueue("record", args=["warm"]).job
    wait_for(lambda: client.job(warm.id).status is Status.SUCCEEDED, timeout=30)
    seconds = []
    for i in range(n):
        time.sleep(random.uniform(0.3, 0.8))  # idle: between polls, at no chosen phase of them
        job = client.enqueue("record", args=[f"w{i}"]).job
        wait_for(lambda j=job.id: client.job(j).status is Status.SUCCEEDED, timeout=30)
        done = client.job(job.id)
        assert done.started_at is not None
        seconds.append((done.started_at - done.created_at).total_seconds())
    assert worker.stop() == 0, worker.log
    return seconds


@pytest.mark.parametrize("listen", [False, True], ids=["polling", "listen-url"])
def test_a_new_job_starts_on_an_idle_worker_by_polling_or_at_once_with_a_listen_url(
    pgbouncer_url, pg_url, tmp_path, workers, listen,
) -> None:
    # Polling at the documented default; listening, with a poll of 5 s, so a
    # start in less than half of it can only have been a wake-up (at the
    # default 1 s, one start a loaded machine held back 0.76 s read as a poll)
    poll = timedelta(seconds=5) if listen else Settings().worker_poll_interval
    env = {"REDRIVE_LISTEN_URL": pg_url} if listen else {}
    worker = WorkerProcess(pgbouncer_url, tmp_path, "--poll-interval", f"{poll.total_seconds():g}s", env=env)
    workers.append(worker)
    worker.wait_started(60)
    client = _client(pgbouncer_url)
    seconds = _start_latency(client, worker, 5)
    client.close()
    scenario = "PgBouncer transaction mode: enqueue to start on an idle worker"
    if listen:
        # Woken at once: most starts far below a poll, and none as late as
        # one (a busy machine may hold one process back for a moment).
        record(scenario, "with REDRIVE_LISTEN_URL, median of 5 (s)", f"{statistics.median(seconds):.3f}", "<= 0.1")
        assert statistics.median(seconds) <= 0.1 and max(seconds) < poll.total_seconds() / 2, seconds
    else:
        bound = poll.total_seconds() + 0.5
        record(scenario, "polling, max of 5 (s)", f"{max(seconds):.3f}", f"<= {bound:g}")
        assert max(seconds) <= bound, seconds
        assert "by polling" in worker.log  # said once, at start
        assert statistics.mean(seconds) > 0.1, "no LISTEN, yet every job started at once: it listened somewhere"


def test_without_the_pool_mode_a_transaction_pooler_is_named_in_the_error(pgbouncer_url) -> None:
    """Two stores that prepare their statements (the session default) take
    turns through PgBouncer 1.18's transaction mode: each lands on the
    session the other prepared its statements in. The error says what to set."""
    stores = [PostgresStore(pgbouncer_url, pool_size=1) for _ in range(2)]
    errors: list[str] = []
    try:
        for _ in range(10):
            for store in stores:
                try:
                    count_jobs(store)
                except StoreError as exc:
                    errors.append(exc.message)
    finally:
        for store in stores:
            store.close()
    assert errors, "no error: prepared statements worked through this PgBouncer"
    assert all("REDRIVE_DATABASE_POOL_MODE=transaction" in e for e in errors), errors
    assert all("\n" not in e for e in errors), errors  # one line
