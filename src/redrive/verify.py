"""``redrive verify``: check a deployment's database the way redrive's own
fault tests check it, on a scratch database it creates and drops (never the
jobs already there), and print one table of figures.

Scenarios:

- **kill storm**: worker processes drain jobs while some are killed with
  SIGKILL and replaced; every job must reach exactly one ending, through legal
  transitions only, and every succeeded job must have run;
- **stale writes**: a lease that expired and was taken over must not be able
  to write: every such write is refused;
- **workflows**, in the same storm: fan-outs created with their joins, and
  jobs that spawn a fan-out and its join with their success; every join must
  be released exactly once (never twice, never not at all), and every
  spawner's children created once.

Every run also checks its checkers: each bug below is planted in a copy of
what the run saw, and the figure it is aimed at must fire ("planted bugs
missed" must be 0). ``--plant NAME`` plants one of them in the real figures
(a lost job, a second ending, a stale write let through, a success that
never ran), to see verify fail.
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
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from redrive.admin import Actor, Admin
from redrive.app import App, JobRequest
from redrive.client import Client
from redrive.core.job import Job, JobEvent, Lease, NewJob
from redrive.core.states import TERMINAL, Status, is_legal
from redrive.core.transitions import Completion
from redrive.core.workflow import WorkflowState
from redrive.errors import ConfigError
from redrive.runtime.context import spawn
from redrive.settings import Settings
from redrive.store.url import open_store
from redrive.workflows import Workflow

# Each planted bug, and the figure that must fire on it.
PLANTS = {"lost": "lost", "double_terminal": "more than one ending",
          "stale_write": "stale writes accepted", "never_ran": "succeeded without running",
          "join_twice": "joins released more than once", "join_never": "joins never released",
          "spawned_twice": "children spawned more than once"}


@dataclass(frozen=True)
class Profile:
    jobs: int
    workers: int
    kills: int
    stale_tries: int
    workflows: int  # fan-outs of FAN jobs and their joins, created up front
    spawners: int  # jobs that spawn a fan-out of FAN and its join


FAN = 5
PROFILES = {"quick": Profile(jobs=600, workers=3, kills=20, stale_tries=20, workflows=20, spawners=10),
            "full": Profile(jobs=3000, workers=3, kills=60, stale_tries=100, workflows=100, spawners=50)}

# The jobs of the kill storm: each run is recorded in a file of its process,
# so the checker can tell a success that never ran from one that did.
app = App()  # REDRIVE_DATABASE_URL: the scratch database, set by verify for its workers


@app.task
def record(key: str) -> str:
    time.sleep(0.15)  # long enough that kills land mid-drain, with jobs in flight
    # REDRIVE_VERIFY_DIR is not a setting: `redrive verify` tells the workers it starts where to write
    with open(os.path.join(os.environ["REDRIVE_VERIFY_DIR"], f"runs-{os.getpid()}.log"), "a") as log:
        log.write(f"{key}\n")
    return key


@app.task
def split(key: str) -> str:
    """A fan-out and its join, spawned with this job's success."""
    children = Workflow(f"verify {key}")
    parts = children.map((record.call(f"{key}-{n}") for n in range(FAN)), name="parts")
    children.add(record.call(f"{key}-join"), name="join", after=parts)
    spawn(children)
    return record(key)


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
        storm = _kill_storm(url, Path(work), chosen)
        stale = _stale_writes(url, chosen.stale_tries, plant)
        missed = [name for name in PLANTS if not _fires(name, storm, url)]
    figures = [*_storm_figures(planted(storm, plant)), stale,
               Figure("planted bugs missed by the checks", len(missed), 0)]
    return figures


def _fires(plant: str, storm: Storm, url: str) -> bool:
    """Whether the check a planted bug is aimed at catches it."""
    if plant == "stale_write":
        return not _stale_writes(url, 1, plant).ok
    return not next(f for f in _storm_figures(planted(storm, plant)) if f.name == PLANTS[plant]).ok


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


@dataclass(frozen=True)
class Storm:
    """What a kill storm left: each job's row (None if gone), its history, and
    how many times each key's body ran."""

    keys: dict[uuid.UUID, str]
    jobs: dict[uuid.UUID, Job | None]
    histories: dict[uuid.UUID, list[JobEvent]]
    runs: Counter[str]
    kills: int
    joins: list[uuid.UUID]  # every workflow's join (in keys, jobs and histories too)
    spawned: Counter[uuid.UUID]  # each spawner's workflows


def _kill_storm(url: str, work: Path, profile: Profile) -> Storm:
    with closing(open_store(url, check_schema=False)) as store:
        store.migrate()
    client = Client(app.registry, settings=Settings.load(database_url=url))
    keys = [f"k{n}" for n in range(profile.jobs)]
    ids = [r.job.id for r in client.enqueue_many([JobRequest("record", args=[key]) for key in keys])]
    spawners = [f"s{n}" for n in range(profile.spawners)]
    keys += spawners
    ids += [r.job.id for r in client.enqueue_many([JobRequest("split", args=[key]) for key in spawners])]
    for n in range(profile.workflows):
        fan = Workflow(f"verify w{n}")
        parts = fan.map((record.call(f"w{n}-{m}") for m in range(FAN)), name="parts")
        fan.add(record.call(f"w{n}-join"), name="join", after=parts)
        client.create_workflow(fan)
    client.close()
    env = {**os.environ, "REDRIVE_DATABASE_URL": url, "REDRIVE_VERIFY_DIR": str(work)}
    command = [sys.executable, "-m", "redrive", "worker", "redrive.verify:app", "--lease-ttl", "2s",
               "--poll-interval", "0.1", "--shutdown-grace", "1s", "-c", "4", "--log-level", "error"]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    workers = [start() for _ in range(profile.workers)]
    rng = random.Random()
    killed = 0
    try:
        with Admin.open(url, actor=Actor.operator("verify")) as watching:
            # Each kill lands on a worker holding jobs, so it interrupts runs.
            deadline = time.monotonic() + 60 + profile.jobs * 0.05
            while killed < profile.kills and time.monotonic() < deadline:
                time.sleep(rng.uniform(0.1, 0.4))
                busy = [n for n, w in enumerate(workers) if w.pid in _holding(watching)]
                if not busy:
                    continue
                victim = rng.choice(busy)
                workers[victim].send_signal(signal.SIGKILL)
                workers[victim].wait()
                workers[victim] = start()
                killed += 1
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
        made = _every_workflow(admin)
        joins: list[uuid.UUID] = []
        spawned = Counter(w.spawned_by for w in made if w.spawned_by is not None)
        named = dict(zip(ids, keys, strict=True))
        for workflow in made:
            steps = admin.store.workflow_steps(id=workflow.id)
            joins += steps["join"]
            prefix = workflow.name.removeprefix("verify ")
            named |= {job_id: f"{prefix}-{m}" for m, job_id in enumerate(steps["parts"])}
            named[steps["join"][0]] = f"{prefix}-join"
        histories = {job_id: admin.store.job_events_list(job_id=job_id) for job_id in named}
        jobs = {job_id: admin.store.job_get(job_id=job_id) for job_id in named}
    return Storm(named, jobs, histories, runs, killed, joins, spawned)


def _every_workflow(admin: Admin) -> list[WorkflowState]:
    found, after = [], None
    while True:
        page = admin.store.workflows_page(after=after, limit=500)
        found += page.items
        if not page.more:
            return found
        after = page.next_cursor


def _holding(admin: Admin) -> set[int]:
    """The pids of the worker processes holding a running job (a worker's id is host:pid:nonce)."""
    page = admin.jobs(status=Status.RUNNING, limit=1000)
    return {int(job.lease_owner.split(":")[-2]) for job in page.items if job.lease_owner}


def planted(storm: Storm, plant: str | None) -> Storm:
    """A copy of what the storm left with one bug planted in it."""
    first = next(iter(storm.keys))
    if plant == "lost":
        return replace(storm, jobs={**storm.jobs, first: None})
    if plant == "double_terminal":
        return replace(storm, histories={**storm.histories, first: [*storm.histories[first],
                                                                     storm.histories[first][-1]]})
    if plant in ("join_twice", "join_never"):
        join = storm.joins[0]
        released = [e for e in storm.histories[join] if e.from_status is Status.PENDING]
        kept = [e for e in storm.histories[join] if e not in released]
        return replace(storm, histories={**storm.histories, join: kept + released * (2 if plant == "join_twice" else 0)})
    if plant == "spawned_twice":
        spawner = next(iter(storm.spawned))
        return replace(storm, spawned=Counter({**storm.spawned, spawner: storm.spawned[spawner] + 1}))
    if plant == "never_ran":
        succeeded = next(i for i, job in storm.jobs.items() if job is not None and job.status is Status.SUCCEEDED)
        return replace(storm, runs=Counter({k: n for k, n in storm.runs.items() if k != storm.keys[succeeded]}))
    return storm


def _storm_figures(storm: Storm) -> list[Figure]:
    jobs, histories, runs = storm.jobs, storm.histories, storm.runs
    # a step its parent's failure blocked is accounted for, as that parent is
    lost = sum(1 for job in jobs.values() if job is None or job.status not in (*TERMINAL, Status.BLOCKED))
    endings = sum(1 for h in histories.values() if sum(e.to_status in TERMINAL for e in h) > 1)
    illegal = sum(1 for h in histories.values() for e in h if not is_legal(e.from_status, e.to_status))
    succeeded = [i for i, job in jobs.items() if job is not None and job.status is Status.SUCCEEDED]
    never_ran = sum(1 for i in succeeded if runs[storm.keys[i]] == 0)
    return [
        Figure("jobs", len(jobs), None),
        Figure("workers killed (SIGKILL)", storm.kills, None),
        Figure("lost", lost, 0),
        Figure("more than one ending", endings, 0),
        Figure("illegal transitions", illegal, 0),
        Figure("succeeded without running", never_ran, 0),
        # record never fails, so a second dispatch means a kill interrupted the first
        Figure("taken back from a killed worker", sum(1 for j in jobs.values() if j and j.attempts > 1), None),
        Figure("ran more than once (at-least-once, after a kill)", sum(1 for n in runs.values() if n > 1), None),
        Figure("workflows (fan-outs and their joins)", len(storm.joins), None),
        Figure("joins released more than once", sum(1 for j in storm.joins if _released(histories[j]) > 1), 0),
        Figure("joins never released", sum(1 for j in storm.joins if _released(histories[j]) == 0), 0),
        Figure("children spawned more than once", sum(1 for n in storm.spawned.values() if n > 1), 0),
    ]


def _released(history: list[JobEvent]) -> int:
    """How often a step was released: left pending (for queued, or blocked)."""
    return sum(1 for e in history if e.from_status is Status.PENDING)


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
            accepted += len(store.jobs_finish([Completion(stale, "from the paused worker")]))
            store.jobs_finish([Completion(second.lease, "done")])
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
