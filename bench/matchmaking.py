"""The matchmaking example's "large user batches" risk, measured: one
09:00 firing in a time zone of ``users`` users, enqueued by redrive's
scheduler (in batches of 500), then drained by worker processes running the
example's job.

The floors, measured in the same run: the same number of keyed no-op jobs
enqueued with ``enqueue_many`` in the same batches (the scheduler's own cost
is what lies above it), and the no-op throughput of the main table (the
example's job does five statements and two commits of its own).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

from bench.harness import ROOT, BenchError
from bench.systems.base import fresh_database
from redrive import Actor, App, JobRequest, Scheduler

EXAMPLE = ROOT / "examples" / "matchmaking"
ZONE = "Asia/Kathmandu"  # +05:45
FIRING = datetime(2027, 3, 1, 3, 15, tzinfo=UTC)  # 09:00 there
BATCH = 500  # the scheduler's batch


def measure_matchmaking(users: int, workers: int = 2) -> dict[str, float]:
    sys.path.insert(0, str(EXAMPLE))
    from matchmaking.db import Db
    from matchmaking.settings import Settings
    from matchmaking.tasks import TASK, create_tables, make_app
    from matchmaking.users import spread

    url = _migrated("bench_matchmaking")
    settings = Settings(database_url=url)
    create_tables(settings)
    with Db(url) as db:
        spread(db, users, zones=(ZONE,))
    results: dict[str, float] = {}
    with make_app(settings) as app:
        clock = {"now": FIRING - timedelta(minutes=1)}
        scheduler = Scheduler(app.client, clock=lambda: clock["now"], grace=timedelta(hours=1))
        scheduler.tick()  # the schedule's checkpoint, before the firing
        clock["now"] = FIRING + timedelta(seconds=1)
        started = time.monotonic()
        made = scheduler.tick()
        results["firing enqueue s"] = time.monotonic() - started
        if len(made) != users:
            raise BenchError(f"the firing made {len(made)} jobs for {users} users")
        env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(ROOT / "src")])}
        started = time.monotonic()
        procs = [subprocess.Popen([sys.executable, "-m", "matchmaking", "worker"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
        try:
            with app.admin(Actor.operator("bench")) as admin:
                while admin.jobs(task=TASK, status=["queued", "running"], limit=1):
                    if time.monotonic() - started > 3600 or any(p.poll() is not None for p in procs):
                        raise BenchError("the matchmaking workers stopped or took over an hour")
                    time.sleep(0.5)
                results["drain s"] = time.monotonic() - started
                if admin.jobs(task=TASK, status="failed", limit=1):
                    raise BenchError("matchmaking jobs failed during the drain")
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=60)
    results["keyed enqueue_many floor s"] = _enqueue_floor(users)
    return results


def _migrated(name: str) -> str:
    url = fresh_database(name)
    from redrive.store.url import open_store

    store = open_store(url, check_schema=False)
    store.migrate()
    store.close()
    return url


def _enqueue_floor(count: int) -> float:
    with App(_migrated("bench_matchmaking_floor")) as app:
        app.task(name="noop")(lambda **_: None)
        requests = [JobRequest("noop", kwargs={"n": n}, idempotency_key=f"floor:{n}") for n in range(count)]
        started = time.monotonic()
        for start in range(0, count, BATCH):
            app.enqueue_many(requests[start:start + BATCH])
        return time.monotonic() - started
