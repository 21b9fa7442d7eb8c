"""The benchmark's Markdown: one table of medians, then the targets as ratios."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from typing import Any

COLUMNS = ["enqueue 1/call", "enqueue 1000/call", "jobs/s 1 proc", "jobs/s 2 proc",
           "start p50 ms", "start p99 ms", "peak RSS MiB", "CPU µs/job"]
PACKAGES = ["redrive", "pgqueuer", "asyncpg", "procrastinate", "celery", "redis", "psycopg", "huey"]
LOWER_IS_BETTER = {"start p50 ms", "start p99 ms", "peak RSS MiB", "CPU µs/job"}
PEERS = {"redrive-pg": ("pgqueuer", "procrastinate", "celery"), "redrive-sqlite": ("huey",)}
# Each redrive figure's floors: what the hardware and the driver allow with no queue library,
# and for processing, what redrive's own store allows with no worker.
FLOORS = {("redrive-pg", "enqueue 1/call"): ("floor-psycopg",),
          ("redrive-pg", "jobs/s 1 proc"): ("floor-store-pg",),
          ("redrive-pg", "jobs/s 2 proc"): ("floor-pgbench", "floor-store-pg"),
          ("redrive-pg", "CPU µs/job"): ("floor-store-pg",),
          ("redrive-sqlite", "jobs/s 1 proc"): ("bare-sqlite", "floor-store-sqlite"),
          ("redrive-sqlite", "CPU µs/job"): ("bare-sqlite", "floor-store-sqlite")}
STORE_ALONE = {"redrive-pg": "floor-store-pg", "redrive-sqlite": "floor-store-sqlite"}
# The worker's own CPU per no-op job before the per-job work was cut (bench/run, quick profile,
# 2026-11-26 17:20 UTC, one worker process; bench/results/2026-11-26-quick-floors.md), and in
# that run the CPU per job of the peer it is read against: the target is half of it. A fixed
# figure alone cannot be compared across runs on a machine whose speed drifts two- to
# fourfold within a day, so the target is judged on the ratio to that peer, measured in the
# same run, against the same ratio before.
CPU_BEFORE_US: dict[str, tuple[float, str, float]] = {
    "redrive-pg": (50.4, "pgqueuer", 30.9),
    "redrive-sqlite": (78.4, "huey", 97.3),
}


@dataclass
class Target:
    what: str
    system: str
    column: str
    peer: str
    peer_column: str
    at_least: float | None = None  # ratio must be >= this
    at_most: float | None = None


TARGETS = [
    Target("PostgreSQL, 2 worker processes ≥ 60 % of the pgbench claim-and-archive floor", "redrive-pg",
           "jobs/s 2 proc", "floor-pgbench", "jobs/s 2 proc", at_least=0.6),
    # The first target's own floor: the barest Python worker (psycopg, pgbench's SQL, a no-op call a job)
    # against pgbench. Under 60 %, no Python worker can meet that target on this machine.
    Target("the bare Python claim-and-archive loop, 2 processes ≥ 60 % of the pgbench floor (if not, "
           "no Python worker can meet the target above here)", "floor-psycopg", "jobs/s 2 proc",
           "floor-pgbench", "jobs/s 2 proc", at_least=0.6),
    # Both targets' floor in redrive itself: its store's claim and ending with no worker around them,
    # every guarantee kept. Under either bound, only cheaper statements, not a cheaper worker, can meet it.
    Target("redrive's store alone (claim and finish, no worker), 2 processes ≥ 60 % of the pgbench floor "
           "(if not, no worker on redrive's store can meet the 60 % target here)", "floor-store-pg",
           "jobs/s 2 proc", "floor-pgbench", "jobs/s 2 proc", at_least=0.6),
    Target("PostgreSQL, 2 worker processes ≥ 1.5× PgQueuer", "redrive-pg", "jobs/s 2 proc",
           "pgqueuer", "jobs/s 2 proc", at_least=1.5),
    Target("redrive's store alone, 2 processes ≥ 1.5× PgQueuer (if not, no worker on redrive's store "
           "can meet the target above here)", "floor-store-pg", "jobs/s 2 proc", "pgqueuer", "jobs/s 2 proc",
           at_least=1.5),
    Target("single enqueue ≥ 90 % of the minimal psycopg loop", "redrive-pg", "enqueue 1/call",
           "floor-psycopg", "enqueue 1/call", at_least=0.9),
    # That target's own floor: the same loop writing one bare row into redrive's job table (its
    # primary key and the indexes the claim and the pages read), with no event and no wake-up.
    Target("a bare row into redrive's job table ≥ 90 % of the minimal psycopg loop (if not, no "
           "single enqueue into that table can meet the target above here)", "floor-jobtable",
           "enqueue 1/call", "floor-psycopg", "enqueue 1/call", at_least=0.9),
    Target("batch enqueue ≥ PgQueuer (in each of three consecutive runs)", "redrive-pg", "enqueue 1000/call",
           "pgqueuer", "enqueue 1000/call", at_least=1.0),
    Target("SQLite, 1 process ≥ 30 % of the bare SQLite loop", "redrive-sqlite", "jobs/s 1 proc",
           "bare-sqlite", "jobs/s 1 proc", at_least=0.3),
    Target("redrive's store alone on SQLite (claim and finish, no worker) ≥ 30 % of the bare SQLite loop "
           "(if not, no worker on redrive's store can meet the target above here)", "floor-store-sqlite",
           "jobs/s 1 proc", "bare-sqlite", "jobs/s 1 proc", at_least=0.3),
    Target("SQLite, 1 process ≥ 3× Huey", "redrive-sqlite", "jobs/s 1 proc", "huey", "jobs/s 1 proc",
           at_least=3.0),
    Target("redrive's store alone on SQLite ≥ 3× Huey (if not, no worker on redrive's store can meet the "
           "target above here)", "floor-store-sqlite", "jobs/s 1 proc", "huey", "jobs/s 1 proc", at_least=3.0),
    Target("enqueue-to-start p50 ≤ PgQueuer", "redrive-pg", "start p50 ms",
           "pgqueuer", "start p50 ms", at_most=1.0),
    Target("metrics and JSON logs on ≥ 90 % of off (2 processes)", "redrive-pg-observed", "jobs/s 2 proc",
           "redrive-pg", "jobs/s 2 proc", at_least=0.9),
    Target("reliability on ≥ 90 % of minimal (2 processes)", "redrive-pg", "jobs/s 2 proc",
           "redrive-pg-minimal", "jobs/s 2 proc", at_least=0.9),
]


@dataclass
class Report:
    profile: Any
    repeats: int
    table: dict
    names: dict  # short name -> system
    backlog: dict[str, float] | None
    dashboard: dict[str, float] | None
    matchmaking: dict[str, float] | None
    seconds: float
    when: datetime
    machine: str

    def _cell(self, short: str, column: str) -> float | None:
        system = self.names.get(short)
        return None if system is None else self.table[system.name].median(column)

    def _against(self) -> list[str]:
        """Each redrive figure as a ratio to its floor (measured in this run)
        and to its best peer (higher is better, but for times, memory and
        CPU, where a ratio under 1 is redrive ahead)."""
        rows = []
        for short, peers in PEERS.items():
            for column in COLUMNS:
                mine = self._cell(short, column)
                if mine is None:
                    continue
                floors = [(f, v) for f in FLOORS.get((short, column), ()) if (v := self._cell(f, column)) is not None]
                measured = [(p, v) for p in peers if (v := self._cell(p, column)) is not None]
                pick = min if column in LOWER_IS_BETTER else max
                best = pick(measured, key=lambda pair: pair[1]) if measured else None
                peer = f"{self.names[best[0]].name} {_fmt(best[1])} | {mine / best[1]:.2f}" if best else "– | –"
                for floor_name, floor in floors or [(None, None)]:  # a row for each floor
                    if floor is None and best is None:
                        continue
                    rows.append(f"| {short} {column} | {_fmt(mine)} | "
                                + (f"{self.names[floor_name].name} {_fmt(floor)} | {mine / floor:.2f}"
                                   if floor else "– | –")
                                + f" | {peer} |")
        if not rows:
            return []
        return ["", "## Against the floor and the best peer (ratios within this run)", "",
                "| figure | redrive | floor | × floor | best peer | × peer |", "|---|---:|---|---:|---|---:|", *rows]

    def markdown(self) -> str:
        p = self.profile
        out = [
            f"# Benchmark, {self.when:%Y-%m-%d %H:%M} UTC, profile `{p.name}`",
            "",
            f"{_cpus()} CPUs, {self.machine}, Python {sys.version.split()[0]}, {_postgres()}. "
            f"Medians of {self.repeats} repeats; no-op jobs; one run took {self.seconds / 60:.1f} min. "
            f"Enqueue: {p.single:,} jobs one call each, up to {p.batch:,} in calls of 1,000 "
            f"(or for {p.budget_s:.0f} s). "
            f"Processing: a backlog of up to {p.backlog:,} (what was enqueued in {p.budget_s:.0f} s), "
            f"timed from the first job's start to the last one's end (or for {p.budget_s:.0f} s). "
            f"Start latency: {p.latency_jobs} jobs enqueued 20 ms apart to one idle worker.",
            "",
            *(["**Smoke profile: runs too small to mean anything; it only proves every part still runs.**", ""]
              if p.name == "smoke" else []),
            "| system | " + " | ".join(COLUMNS) + " |",
            "|---|" + "---:|" * len(COLUMNS),
        ]
        for name, cells in self.table.items():
            row = [_fmt(cells.median(c)) for c in COLUMNS]
            out.append(f"| {name} | " + " | ".join(row) + " |")
        out += self._against()
        out += ["", "## Targets (ratios within this run)", "", "| target | ratio | met |", "|---|---:|:---:|"]
        for t in TARGETS:
            a, b = self._cell(t.system, t.column), self._cell(t.peer, t.peer_column)
            if a is None or b is None:
                continue
            ratio = a / b
            met = (t.at_least is None or ratio >= t.at_least) and (t.at_most is None or ratio <= t.at_most)
            out.append(f"| {t.what} | {ratio:.2f} | {'yes' if met else '**no**'} |")
        for short, (before, peer, peer_before) in CPU_BEFORE_US.items():
            now, peer_now = self._cell(short, "CPU µs/job"), self._cell(peer, "CPU µs/job")
            if peer_now is None:
                continue
            rows = []
            if now is not None:
                rows.append((now, f"{short}: worker CPU per no-op job ≤ half of before the cuts, each read against "
                                  f"{self.names[peer].name} in its own run ({now:.0f} µs ÷ {peer_now:.0f} µs now, "
                                  f"{before:.0f} ÷ {peer_before:.0f} before; now ÷ before shown)"))
            if (store := self._cell(STORE_ALONE[short], "CPU µs/job")) is not None:
                rows.append((store, f"redrive's store alone for {short} (claim and finish, no worker): its CPU per "
                                    f"job ≤ half of the worker's before the cuts, read the same way ({store:.0f} µs) "
                                    f"(if not, no worker on redrive's store can meet the target above here)"))
            for cpu, what in rows:
                ratio = (cpu / peer_now) / (before / peer_before)
                out.append(f"| {what} | {ratio:.2f} | {'yes' if ratio <= 0.5 else '**no**'} |")
        if self.backlog:
            b = self.backlog
            lo, hi = p.window
            m1, m2 = p.memory_marks
            ratio = b["big jobs/s"] / b["small jobs/s"]
            out.append(f"| {p.big_backlog:,}-job backlog ≥ 90 % of {hi:,}-job "
                       f"(jobs {lo:,}–{hi:,} of each, runs taking turns, medians; 1 process) | {ratio:.2f} | "
                       f"{'yes' if ratio >= 0.9 else '**no**'} |")
            scrape = b[f"scrape ms at {p.big_backlog:,} finished"]
            floor = b[f"scrape ms at {hi:,} finished"]
            out.append(f"| /metrics scrape with {p.big_backlog:,} finished jobs under 50 ms "
                       f"({scrape:.1f} ms; {floor:.1f} ms with {hi:,}: ratio shown) | {scrape / floor:.2f} | "
                       f"{'yes' if scrape < 50 else '**no**'} |")
            growth = b[f"RSS MiB at {m2}"] / b[f"RSS MiB at {m1}"]
            out.append(f"| worker RSS at {m2:,} jobs within 10 % of at {m1:,} | {growth:.2f} | "
                       f"{'yes' if growth <= 1.10 else '**no**'} |")
        if self.dashboard:
            d, jobs = self.dashboard, p.dashboard_jobs
            floor = d["login page ms"]
            for page in ("overview", "first jobs page"):
                took = d[f"{page} ms"]
                out.append(f"| dashboard {page} with {jobs:,} jobs under 200 ms ({took:.1f} ms; "
                           f"the login page, which reads nothing, {floor:.1f} ms: ratio shown) | {took / floor:.2f} | "
                           f"{'yes' if took < 200 else '**no**'} |")
        if self.backlog:  # after the targets' last rows: a paragraph ends a table
            out += ["", "Backlog run (redrive-pg, 1 worker process): "
                    + ", ".join(f"{k} {_fmt(v)}" for k, v in self.backlog.items()) + "."]
        if self.matchmaking:
            m, users = self.matchmaking, p.matchmaking_users
            noop = self._cell("redrive-pg", "jobs/s 2 proc")
            drained = users / m["drain s"]
            out += ["", f"Matchmaking's large batch: one 09:00 firing for {users:,} users in one time zone. "
                    f"Its job spawned the day's workflow ({users:,} user steps and the summary after them), "
                    f"written with its ending: run and ending {m['spawn run and ending s']:.1f} s "
                    f"(the same number of keyed jobs through `enqueue_many` in batches of 500: "
                    f"{m['keyed enqueue_many floor s']:.1f} s, ratio "
                    f"{m['spawn run and ending s'] / m['keyed enqueue_many floor s']:.2f}); drained by 2 worker "
                    f"processes running the example's job in {m['drain s']:.0f} s ({drained:,.0f} jobs/s"
                    + (f"; no-op jobs, 2 processes: {noop:,.0f} jobs/s" if noop else "") + "); "
                    f"from the last user's ending to the summary's start: {m['last user to summary s']:.3f} s."]
        out += self._samples()
        out += ["", "Versions: " + ", ".join(f"{n} {_version(n)}" for n in PACKAGES if _version(n)) + "."]
        return "\n".join(out) + "\n"

    def _samples(self) -> list[str]:
        """Every repeat's figure, in repeat order, each with the system's place
        in that repeat after the floors: a median hides which repeat was slow,
        and whether it was the place or the code."""
        if self.repeats < 2:
            return []
        rows = []
        for name, cells in self.table.items():
            for column in COLUMNS:
                values = cells.samples.get(column)
                if not values:
                    continue
                places = cells.places if len(cells.places) == len(values) else [None] * len(values)
                rows.append(f"| {name} | {column} | " + ", ".join(
                    _fmt(v) + ("" if place is None else f" ({_ordinal(place)})")
                    for v, place in zip(values, places, strict=True)) + " |")
        if not rows:
            return []
        return ["", "## Each repeat (the system's place after the floors in brackets)", "",
                "| system | figure | repeats, in order |", "|---|---|---|", *rows]


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _fmt(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


def _postgres() -> str:
    try:
        out = subprocess.run(["psql", "-h", "127.0.0.1", "-d", "postgres", "-tAc", "SHOW server_version"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        return f"PostgreSQL {out.split()[0]}" if out else "PostgreSQL ?"
    except (OSError, subprocess.TimeoutExpired):
        return "PostgreSQL ?"
