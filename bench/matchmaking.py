"""The matchmaking example's "large user batches" risk, measured: one
09:00 firing in a time zone of ``users`` users. The firing's job spawns the
day's workflow (a step per user, then the summary, after every user's job
has ended) in the transaction that ends it; worker processes running the
example's jobs drain it. Reported: the spawning job's run and ending (the
workflow of ``users`` + 1 steps written), the drain, and the time from the
last user's ending to the summary's start (the join's release), on the
database's clock.

The floors, measured in the same run: the same number of keyed no-op jobs
enqueued with ``enqueue_many`` in batches of 500 (the spawn's cost is what
lies above it), and the no-op throughput of the main table (the example's
job does five statements and two commits of its own).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.harness import ROOT, BenchError
from bench.systems.base import fresh_database
from redrive import Actor, App, JobRequest, Scheduler, Status

EXAMPLE = ROOT / "examples" / "matchmaking"
ZONE = "Asia/Kathmandu"  # +05:45
FIRING = datetime(2027, 3, 1, 3, 15, tzinfo=UTC)  # 09:00 there
BATCH = 500  # the floor's batch


def measure_matchmaking(users: int, workers: int = 2) -> dict[str, float]:
    sys.path.insert(0, str(EXAMPLE))
    from matchmaking.db import Db
    from matchmaking.settings import Settings
    from matchmaking.tasks import RUN, SUMMARY, TASK, create_tables, make_app
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
        made = scheduler.tick()
        if [r.job.task for r in made] != [RUN]:
            raise BenchError(f"the firing made {len(made)} jobs, not the zone's one")
        env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(ROOT / "src")])}
        started = time.monotonic()
        procs = [subprocess.Popen([sys.executable, "-m", "matchmaking", "worker"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
        try:
            with app.admin(Actor.operator("bench")) as admin:
                while not admin.jobs(task=SUMMARY, status="succeeded", limit=1):
                    if time.monotonic() - started > 3600 or any(p.poll() is not None for p in procs):
                        raise BenchError("the matchmaking workers stopped or took over an hour")
                    time.sleep(0.5)
                results["drain s"] = time.monotonic() - started
                if admin.jobs(task=TASK, status="failed", limit=1):
                    raise BenchError("matchmaking jobs failed during the drain")
                (day,) = admin.workflows()
                if day.counts["users"] != {Status.SUCCEEDED: users}:
                    raise BenchError(f"the day's users ended {day.counts['users']}")
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=60)
        results.update(_timeline(url, made[0].job.id, TASK, SUMMARY))
    results["keyed enqueue_many floor s"] = _enqueue_floor(users)
    return results


def _timeline(url: str, spawner: Any, task: str, summary_task: str) -> dict[str, float]:
    """From the store's own records, on the database's clock: the spawning
    job's run to its ending (the workflow written with it), and the last
    user's ending to the summary's start."""
    import psycopg

    with psycopg.connect(url) as conn:
        ((ran, ended),) = conn.execute(
            "SELECT min(at) FILTER (WHERE to_status = 'running'), max(at) FILTER (WHERE to_status = 'succeeded') "
            "FROM redrive_job_event_read WHERE job_id = %s", (spawner,)).fetchall()
        ((last_user,),) = conn.execute(
            "SELECT max(finished_at) FROM redrive_job_done WHERE task = %s", (task,)).fetchall()
        ((summary,),) = conn.execute(
            "SELECT min(e.at) FROM redrive_job_event_read AS e JOIN redrive_job_done AS j ON j.id = e.job_id "
            "WHERE j.task = %s AND e.to_status = 'running'", (summary_task,)).fetchall()
    return {"spawn run and ending s": (ended - ran).total_seconds(),
            "last user to summary s": (summary - last_user).total_seconds()}


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
