"""``python -m bench``: redrive and its peers on one machine, in one run.

Every figure that matters is a ratio between two systems measured in the same
run, because absolute numbers drift on shared machines. Each measurement is
repeated and its median reported; the systems take turns within each repeat so
drift hits them alike. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import itertools
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import ROOT, BenchError, Workers, cpu_us_per_job, throughput
from bench.report import Report

ENQUEUE_BATCH = 1000


@dataclass(frozen=True)
class Profile:
    name: str
    repeats: int
    single: int  # jobs enqueued one call each
    batch: int  # jobs enqueued ENQUEUE_BATCH per call
    backlog: int  # jobs waiting when the workers start
    budget_s: float  # a throughput run stops after this long, done or not
    latency_jobs: int
    big_backlog: int
    window: tuple[int, int]  # throughput is compared over these jobs of each backlog
    memory_marks: tuple[int, int]
    dashboard_jobs: int  # in the database when the dashboard's pages are timed
    matchmaking_users: int  # in the one time zone whose 09:00 firing is enqueued and drained


PROFILES = {
    # quick's batch window is 150,000 jobs (about 2.5 s at redrive's and
    # PgQueuer's rates, still stopped by the 4 s budget): in windows of 50,000
    # (under a second) the same code scattered 15-25 % from sample to sample,
    # more than the gap the batch enqueue target reads (docs/performance.md).
    "quick": Profile("quick", 3, 1000, 150_000, 30_000, 4.0, 100, 1_000_000, (2_000, 10_000),
                     (100_000, 1_000_000), 100_000, 100_000),
    "full": Profile("full", 5, 3000, 200_000, 100_000, 10.0, 300, 1_000_000, (2_000, 10_000),
                    (100_000, 1_000_000), 100_000, 100_000),
    # For the test suite: proves every part still runs, measures nothing. A
    # quarter-second budget: the floors' backlogs are sized to outlast the
    # budget at the quick profile's rates, and at a second they took half
    # the run to enqueue (a run under load passed its test's time limit).
    "smoke": Profile("smoke", 1, 20, 500, 500, 0.25, 5, 3_000, (200, 1_000), (1_000, 3_000), 2_000, 300),
}


def systems(names: list[str], workdir: Path) -> list:
    from bench.floors import Floors, JobTableLoop, PsycopgLoop, StoreLoop
    from bench.systems.bare_sqlite import BareSqlite
    from bench.systems.redrive import Redrive

    made = {
        "floor-pgbench": Floors,
        "floor-psycopg": PsycopgLoop,
        "floor-jobtable": JobTableLoop,
        "floor-store-pg": lambda: StoreLoop("pg", workdir),
        "floor-store-sqlite": lambda: StoreLoop("sqlite", workdir),
        "redrive-pg": lambda: Redrive("pg", workdir),
        "redrive-pg-minimal": lambda: Redrive("pg", workdir, profile="minimal"),
        "redrive-pg-observed": lambda: Redrive("pg", workdir, observed=True),
        "redrive-sqlite": lambda: Redrive("sqlite", workdir),
        "redrive-sqlite-normal": lambda: Redrive("sqlite", workdir, synchronous="normal"),
        "bare-sqlite": lambda: BareSqlite(workdir),
    }
    if any(n in names for n in ("pgqueuer", "procrastinate", "celery")):
        from bench.systems.celery import Celery
        from bench.systems.pgqueuer import PgQueuer
        from bench.systems.procrastinate import Procrastinate

        made |= {"pgqueuer": PgQueuer, "procrastinate": Procrastinate, "celery": Celery}
    if "huey" in names:
        from bench.systems.huey import Huey

        made["huey"] = lambda: Huey(workdir)
    return [made[n]() for n in names]


# Measured when named (--systems): what REDRIVE_SQLITE_SYNCHRONOUS=normal gains.
EXTRA = ["redrive-sqlite-normal"]
ALL = ["floor-pgbench", "floor-psycopg", "floor-jobtable", "floor-store-pg", "floor-store-sqlite", "redrive-pg",
       "redrive-pg-minimal", "redrive-pg-observed", "pgqueuer", "procrastinate", "celery", "redrive-sqlite",
       "bare-sqlite", "huey"]
# measured beside the systems, not as one
FLOORS = {"floor-pgbench", "floor-psycopg", "floor-jobtable", "floor-store-pg", "floor-store-sqlite"}
SINGLE_PROCESS = {"redrive-sqlite", "redrive-sqlite-normal", "bare-sqlite", "huey"}  # one SQLite writer: 2 processes only contend


@dataclass
class Cells:
    samples: dict[str, list[float]] = field(default_factory=dict)
    # each repeat's place of the system after the floors (1: first), in
    # repeat order, so the report can show which place a slow sample had
    places: list[int] = field(default_factory=list)

    def add(self, column: str, value: float) -> None:
        self.samples.setdefault(column, []).append(value)

    def median(self, column: str) -> float | None:
        values = self.samples.get(column)
        return statistics.median(values) if values else None


def turns(entries: list[tuple[Any, str]], repeat: int, repeats: int) -> list[tuple[Any, str]]:
    """The order of one repeat: the floors first, then the systems, each
    repeat starting the systems at a different place (a third of the way on
    for the third of three repeats). The first system after the floors ran
    10-15 % slower than the same code later in its repeat (batch enqueue,
    every repeat of two runs with the order swapped: docs/performance.md), so
    no system may be first in more than one repeat, and each cell's median
    is free of it."""
    floors = [entry for entry in entries if entry[1] in FLOORS]
    rest = [entry for entry in entries if entry[1] not in FLOORS]
    shift = repeat * len(rest) // repeats
    return floors + rest[shift:] + rest[:shift]


def timed(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_floor(name: str, floor, profile: Profile, cells: Cells) -> None:
    """The floors in the columns of the figures they bound: pgbench's one-row
    insert and two clients claiming and archiving; Python's insert loop and
    two Python processes claiming and archiving; Python's insert loop into
    redrive's own job table; redrive's store alone claiming and finishing,
    from one and two processes on PostgreSQL and one on SQLite, with its
    CPU a job."""
    # three seconds of claiming, and a backlog that outlasts them at well past any rate seen here
    # (about 135,000 jobs/s through pgbench; through redrive's store 36,000 from one process and 44,000 from two on
    # PostgreSQL, 28,000 on SQLite)
    seconds = min(profile.budget_s, 3.0)
    if name == "floor-store-pg":
        # one process too: its CPU a job is read beside the worker's, which the bench takes from 1 process
        rate, cpu = floor.claim_and_finish(1, int(60_000 * seconds), seconds)
        cells.add("jobs/s 1 proc", rate)
        cells.add("CPU µs/job", cpu)
        cells.add("jobs/s 2 proc", floor.claim_and_finish(2, int(80_000 * seconds), seconds)[0])
        return
    if name == "floor-store-sqlite":
        rate, cpu = floor.claim_and_finish(1, int(45_000 * seconds), seconds)
        cells.add("jobs/s 1 proc", rate)
        cells.add("CPU µs/job", cpu)
        return
    if name == "floor-pgbench":
        cells.add("enqueue 1/call", floor.insert(profile.budget_s))
    else:
        cells.add("enqueue 1/call", floor.insert(profile.single))
    if name != "floor-jobtable":
        # pgbench runs whole seconds, at least one: the backlog must outlast that
        cells.add("jobs/s 2 proc", floor.claim_and_archive(int(250_000 * max(1, round(seconds))), seconds))


def measure_enqueue(system, profile: Profile, cells: Cells) -> None:
    system.reset()
    cells.add("enqueue 1/call", profile.single / timed(lambda: system.enqueue(profile.single, 1)))
    system.reset()
    start = time.perf_counter()
    sent = enqueue_for(system, profile.batch, profile.budget_s)
    cells.add(f"enqueue {ENQUEUE_BATCH}/call", sent / (time.perf_counter() - start))


def enqueue_for(system, jobs: int, budget_s: float) -> int:
    """Up to ``jobs`` in calls of ENQUEUE_BATCH, stopping after ``budget_s``
    like the throughput runs, so a slow peer (Celery sends one message per
    job) does not take a third of the run; returns how many were sent."""
    sent, start = 0, time.perf_counter()
    while sent < jobs and time.perf_counter() - start < budget_s:
        n = min(ENQUEUE_BATCH, jobs - sent)
        system.enqueue(n, ENQUEUE_BATCH)
        sent += n
    return sent


def measure_throughput(system, processes: int, profile: Profile, cells: Cells) -> None:
    system.reset()
    # A system that cannot enqueue the backlog within the budget (Celery here)
    # is timed on what it did enqueue: its workers may finish early, and the
    # rate is still jobs over time from the first start to the last end.
    backlog = enqueue_for(system, profile.backlog, profile.budget_s)
    with Workers(system.worker_argv(), processes) as workers:
        progress = workers.wait(backlog, budget_s=profile.budget_s, timeout_s=profile.budget_s + 120)
        cells.add(f"jobs/s {processes} proc", throughput(progress))
        cells.add("peak RSS MiB", workers.peak_rss_kib() / 1024)
        if processes == 1:
            cells.add("CPU µs/job", cpu_us_per_job(progress))


def measure_latency(system, profile: Profile, cells: Cells) -> None:
    system.reset()
    with Workers(system.worker_argv(), 1) as workers:
        system.enqueue_timed(time.time())  # the first job also waits for the worker to start
        workers.wait(1, budget_s=60, timeout_s=60)
        time.sleep(0.5)
        for _ in range(profile.latency_jobs):
            system.enqueue_timed(time.time())
            time.sleep(0.02)
        progress = workers.wait(profile.latency_jobs + 1, budget_s=60, timeout_s=60)
    latencies = sorted(lat for p in progress for lat in p.latencies[1:] if p.first is not None)
    if not latencies:
        raise BenchError(f"{system.name}: no latency samples")
    cells.add("start p50 ms", statistics.median(latencies) * 1000)
    cells.add("start p99 ms", latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000)


def measure_backlog(system, profile: Profile, repeats: int) -> dict[str, float]:
    """Throughput over the same window of jobs with a small and a huge backlog
    behind it. A window is under a second of work, so the two take turns, as
    the systems do: a slow second of this shared machine then hits one sample
    of each, where consecutive windows of one huge run all fell in the same
    slow second. Medians are compared. The last huge run goes on through its
    whole backlog for one worker's RSS as it passes two counts."""
    lo, hi = profile.window
    small, big = [], []
    scrape_empty = None
    for repeat in range(repeats):
        small.append(_rates(_backlog_run(system, hi, [lo, hi]), [lo, hi])[0])
        if scrape_empty is None:
            scrape_empty = system.scrape_s()  # the floor: the same scrape over a small history
        last = repeat == repeats - 1
        memory = list(profile.memory_marks) if last else []
        seen = _backlog_run(system, profile.big_backlog, [lo, hi, *memory],
                            until=profile.big_backlog if last else hi)
        big.append(_rates(seen, [lo, hi])[0])
    # Right after a million jobs left it, the hot table is all dead rows until
    # autovacuum passes; the target is the steady state, after a vacuum.
    drained = system.scrape_s()
    system.vacuum()
    results = {"small jobs/s": statistics.median(small), "big jobs/s": statistics.median(big),
               f"scrape ms at {hi:,} finished": scrape_empty * 1000,
               "scrape ms right after the drain, before vacuum": drained * 1000,
               f"scrape ms at {profile.big_backlog:,} finished": system.scrape_s() * 1000}
    for mark in profile.memory_marks:
        results[f"RSS MiB at {mark}"] = seen[mark][1] / 1024
    return results


def measure_dashboard(system, profile: Profile) -> dict[str, float]:
    """The dashboard's overview and first jobs page over ``dashboard_jobs``
    jobs, half of them run this last hour (so the overview's chart has an
    hour of history to read) and half waiting, against the login page served
    the same way (the floor: a page that reads nothing)."""
    system.reset()
    total = profile.dashboard_jobs
    system.enqueue(total, ENQUEUE_BATCH * 10)
    with Workers(system.worker_argv(), 1) as workers:
        workers.wait(total // 2, budget_s=float("inf"), timeout_s=1800)
    return system.dashboard_ms()


def _backlog_run(system, backlog: int, marks: list[int], *, until: int | None = None) -> dict:
    """One worker process through a fresh backlog, until ``until`` jobs ran
    (default: all of them): when it passed each mark, and its RSS then."""
    system.reset()
    system.enqueue(backlog, ENQUEUE_BATCH * 10)
    with Workers(system.worker_argv(), 1, marks=sorted(set(marks))) as workers:
        progress = workers.wait(until or backlog, budget_s=float("inf"), timeout_s=3600)
    return progress[0].marks


def _rates(seen: dict, bounds: list[int]) -> list[float]:
    """Jobs/s between consecutive bounds."""
    return [(b - a) / (seen[b][0] - seen[a][0]) for a, b in itertools.pairwise(bounds)]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _system_names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in ALL + EXTRA]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown system {unknown[0]!r} (choose from {', '.join(ALL + EXTRA)})")
    if not names:
        raise argparse.ArgumentTypeError("name at least one system")
    if len(set(names)) < len(names):
        raise argparse.ArgumentTypeError("a system is named twice")
    return names


def _writable(out: Path) -> None:
    """Fail before a run of minutes, not after it; leave nothing behind."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        existed = out.exists()
        with out.open("a"):
            pass
        if not existed:
            out.unlink()
    except FileExistsError as exc:  # mkdir met a file where a directory must be
        raise BenchError(f"cannot write the report to {out}: {exc.filename} is not a directory") from None
    except OSError as exc:
        raise BenchError(f"cannot write the report to {out}: {exc.strerror or exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    parser.add_argument("--systems", type=_system_names, default=ALL, help=f"comma-separated, of {ALL + EXTRA}")
    parser.add_argument("--repeats", type=_positive, help="overrides the profile's")
    parser.add_argument("--out", type=Path, help="Markdown report (default bench/results/DATE-PROFILE.md)")
    args = parser.parse_args(argv)
    profile = PROFILES[args.profile]
    repeats = args.repeats or profile.repeats
    names = args.systems
    when = datetime.now(UTC)
    out = args.out or ROOT / "bench" / "results" / f"{when:%Y-%m-%d}-{profile.name}.md"
    _writable(out)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="redrive-bench-") as work:
        chosen = systems(names, Path(work))
        table = {s.name: Cells() for s in chosen}
        try:
            for repeat in range(repeats):
                order = turns(list(zip(chosen, names, strict=True)), repeat, repeats)
                floors = sum(1 for _, name in order if name in FLOORS)
                for place, (system, name) in enumerate(order, start=1 - floors):
                    print(f"[{time.monotonic() - started:5.0f}s] repeat {repeat + 1}/{repeats}: "
                          f"{system.name}", file=sys.stderr, flush=True)
                    cells = table[system.name]
                    if name in FLOORS:
                        measure_floor(name, system, profile, cells)
                        continue
                    cells.places.append(place)
                    measure_enqueue(system, profile, cells)
                    for processes in (1,) if name in SINGLE_PROCESS else (1, 2):
                        measure_throughput(system, processes, profile, cells)
                    measure_latency(system, profile, cells)
            backlog = dashboard = matchmaking = None
            if "redrive-pg" in names:
                print(f"[{time.monotonic() - started:5.0f}s] backlog of {profile.big_backlog:,}",
                      file=sys.stderr, flush=True)
                backlog = measure_backlog(chosen[names.index("redrive-pg")], profile, repeats)
                print(f"[{time.monotonic() - started:5.0f}s] dashboard over {profile.dashboard_jobs:,} jobs",
                      file=sys.stderr, flush=True)
                dashboard = measure_dashboard(chosen[names.index("redrive-pg")], profile)
                print(f"[{time.monotonic() - started:5.0f}s] matchmaking: one firing for "
                      f"{profile.matchmaking_users:,} users", file=sys.stderr, flush=True)
                from bench.matchmaking import measure_matchmaking

                matchmaking = measure_matchmaking(profile.matchmaking_users)
        finally:
            for system in chosen:
                system.close()
    report = Report(profile=profile, repeats=repeats, table=table, names=dict(zip(names, chosen, strict=True)),
                    backlog=backlog, dashboard=dashboard, matchmaking=matchmaking, seconds=time.monotonic() - started,
                    when=when, machine=platform.platform())
    text = report.markdown()
    out.write_text(text)
    print(text)
    print(f"written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:  # workers and databases were already cleaned up on the way out
        print("bench: interrupted, no report written", file=sys.stderr)
        sys.exit(130)
