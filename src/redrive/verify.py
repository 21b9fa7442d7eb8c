"""``redrive verify``: check a deployment's database the way redrive's own
fault tests check it, on a scratch database it creates and drops (never the
jobs already there), and print one table of figures.

Scenarios:

- **kill storm**: worker processes drain jobs while some are killed with
  SIGKILL and replaced; every job must reach exactly one ending, through legal
  transitions only, and every succeeded job must have run;
- **stale writes**: a lease that expired and was taken over must not be able
  to write: every such write is refused.

``--plant NAME`` plants one bug before the checks (a lost job, a second
ending, a stale write let through, a success that never ran), to show that
the checker it is aimed at fires.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from redrive.admin import Actor, Admin
from redrive.app import App, JobRequest
from redrive.client import Client
from redrive.core.job import Completion, Lease, NewJob
from redrive.core.states import TERMINAL, Status, is_legal
from redrive.errors import ConfigError
from redrive.settings import Settings
from redrive.store.url import open_store

PLANTS = ("lost", "double_terminal", "stale_write", "never_ran")


@dataclass(frozen=True)
class Profile:
    jobs: int
    workers: int
    kills: int
    stale_tries: int


PROFILES = {"quick": Profile(jobs=300, workers=3, kills=8, stale_tries=20),
            "full": Profile(jobs=3000, workers=3, kills=20, stale_tries=100)}

# The jobs of the kill storm: each run is recorded in a file of its process,
# so the checker can tell a success that never ran from one that did.
app = App()  # REDRIVE_DATABASE_URL: the scratch database, set by verify for its workers


@app.task
def record(key: str) -> str:
    time.sleep(0.15)  # long enough that kills land mid-drain, with jobs in flight
    with open(os.path.join(os.environ["REDRIVE_VERIFY_DIR"], f"runs-{os.getpid()}.log"), "a") as log:
        log.write(f"{key}\n")
    return key


@dataclass
class Figure:
    name: str
    value: int
    limit: int | None  # None: reported, not judged

    @property
    def ok(self) -> bool:
        return self.limit is None or self.value <= self.limit


def verify(database_url: str, *, profile: str = "quick", plant: str | None = None) -> list[Figure]:
    if profile not in PROFILES:
        raise ConfigError(f"no profile {profile!r}: quick or full")
    if plant is not None and plant not in PLANTS:
        raise ConfigError(f"no planted bug {plant!r}: one of {', '.join(PLANTS)}")
    chosen = PROFILES[profile]
    with _scratch(database_url) as url, tempfile.TemporaryDirectory(prefix="redrive-verify-") as work:
        figures = _kill_storm(url, Path(work), chosen, plant)
        figures.append(_stale_writes(url, chosen.stale_tries, plant))
    return figures


# -- the scratch database ------------------------------------------------------------


@contextmanager
def _scratch(database_url: str) -> Iterator[str]:
    scheme = database_url.split("://", 1)[0].lower()
    name = f"redrive_verify_{uuid.uuid4().hex[:10]}"
    if scheme == "sqlite":
        given = Path(database_url[len("sqlite:///"):])
        path = given.parent / f".{name}.db"  # beside theirs: the same disk, never the same file
        try:
            yield f"sqlite:///{path}"
        finally:
            for leftover in path.parent.glob(f".{name}.db*"):
                leftover.unlink(missing_ok=True)
        return
    if scheme not in ("postgresql", "postgres"):
        raise ConfigError("verify runs on sqlite:/// or postgresql:// databases")
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlsplit(database_url)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- scenarios -------------------------------------------------------------------------


def _kill_storm(url: str, work: Path, profile: Profile, plant: str | None) -> list[Figure]:
    open_store(url, check_schema=False).migrate()
    client = Client(app.registry, settings=Settings.load(database_url=url))
    keys = [f"k{n}" for n in range(profile.jobs)]
    ids = [r.job.id for r in client.enqueue_many([JobRequest("record", args=[key]) for key in keys])]
    env = {**os.environ, "REDRIVE_DATABASE_URL": url, "REDRIVE_VERIFY_DIR": str(work)}
    command = [sys.executable, "-m", "redrive", "worker", "redrive.verify:app", "--lease-ttl", "2s",
               "--poll-interval", "0.1", "--shutdown-grace", "1s", "-c", "4", "--log-level", "error"]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    workers = [start() for _ in range(profile.workers)]
    rng = random.Random()
    try:
        for _ in range(profile.kills):
            time.sleep(rng.uniform(0.2, 0.8))
            victim = rng.randrange(len(workers))
            workers[victim].send_signal(signal.SIGKILL)
            workers[victim].wait()
            workers[victim] = start()
        deadline = time.monotonic() + 60 + profile.jobs * 0.05
        with Admin.open(url, actor=Actor.operator("verify")) as watching:
            while time.monotonic() < deadline and any(sum(q.counts.values()) for q in watching.queues()):
                time.sleep(0.5)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
    runs: Counter[str] = Counter()
    for log in work.glob("runs-*.log"):
        runs.update(log.read_text().split())
    with Admin.open(url, actor=Actor.operator("verify")) as admin:
        if plant == "lost":
            admin.store.jobs_prune(older_than=timedelta(0), limit=1)
        histories = {}
        for job_id in ids:
            histories[job_id] = admin.store.job_events_list(job_id=job_id)
        jobs = {job_id: admin.store.job_get(job_id=job_id) for job_id in ids}
    if plant == "double_terminal":
        histories[ids[0]] = [*histories[ids[0]], histories[ids[0]][-1]]
    if plant == "never_ran":
        runs.pop(keys[0], None)
    client.close()
    lost = sum(1 for job in jobs.values() if job is None or job.status not in TERMINAL)
    endings = sum(1 for h in histories.values() if sum(e.to_status in TERMINAL for e in h) > 1)
    illegal = sum(1 for h in histories.values() for e in h if not is_legal(e.from_status, e.to_status))
    succeeded = [job for job in jobs.values() if job is not None and job.status is Status.SUCCEEDED]
    never_ran = sum(1 for job in succeeded if runs[job.args[0]] == 0)
    return [
        Figure("jobs", profile.jobs, None),
        Figure("workers killed (SIGKILL)", profile.kills, None),
        Figure("lost", lost, 0),
        Figure("more than one ending", endings, 0),
        Figure("illegal transitions", illegal, 0),
        Figure("succeeded without running", never_ran, 0),
        Figure("ran more than once (at-least-once, after a kill)", sum(1 for n in runs.values() if n > 1), None),
    ]


def _stale_writes(url: str, tries: int, plant: str | None) -> Figure:
    store = open_store(url)
    queue = f"verify-stale-{uuid.uuid4().hex[:6]}"
    accepted = 0
    try:
        for _ in range(tries):
            store.jobs_insert(jobs=[NewJob(id=uuid.uuid4(), task="record", queue=queue, args=["stale"], kwargs={},
                                           priority=0, max_attempts=5)])
            (first,) = store.jobs_claim(queues=[queue], limit=1, worker_id="paused", lease_ttl=timedelta(seconds=0.3))
            time.sleep(0.35)  # the first holder is paused past its lease
            store.jobs_reclaim()
            (second,) = store.jobs_claim(queues=[queue], limit=1, worker_id="next", lease_ttl=timedelta(seconds=30))
            stale: Lease = second.lease if plant == "stale_write" else first.lease
            accepted += len(store.jobs_complete(items=[Completion(stale, "from the paused worker")]))
            store.jobs_complete(items=[Completion(second.lease, "done")])
    finally:
        store.close()
    return Figure("stale writes accepted", accepted, 0)


def render(figures: list[Figure]) -> str:
    width = max(len(f.name) for f in figures)
    lines = [f"{'figure':{width}}  {'value':>6}  verdict"]
    for f in figures:
        verdict = "-" if f.limit is None else ("ok" if f.ok else f"FAILED (must be at most {f.limit})")
        lines.append(f"{f.name:{width}}  {f.value:>6}  {verdict}")
    return "\n".join(lines)
