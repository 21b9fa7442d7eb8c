"""The benchmark's Markdown: one table of medians, then the targets as ratios."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from typing import Any

COLUMNS = ["enqueue 1/call", "enqueue 1000/call", "jobs/s 1 proc", "jobs/s 2 proc",
           "start p50 ms", "start p99 ms", "peak RSS MiB"]
PACKAGES = ["redrive", "pgqueuer", "asyncpg", "procrastinate", "celery", "redis", "psycopg"]


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
    Target("PostgreSQL, 2 worker processes ≥ 2× PgQueuer", "redrive-pg", "jobs/s 2 proc",
           "pgqueuer", "jobs/s 2 proc", at_least=2.0),
    Target("batch enqueue ≥ PgQueuer", "redrive-pg", "enqueue 1000/call",
           "pgqueuer", "enqueue 1000/call", at_least=1.0),
    Target("single enqueue ≥ 2× PgQueuer", "redrive-pg", "enqueue 1/call",
           "pgqueuer", "enqueue 1/call", at_least=2.0),
    Target("enqueue-to-start p50 ≤ PgQueuer", "redrive-pg", "start p50 ms",
           "pgqueuer", "start p50 ms", at_most=1.0),
    Target("metrics and JSON logs on ≥ 90 % of off (2 processes)", "redrive-pg-observed", "jobs/s 2 proc",
           "redrive-pg", "jobs/s 2 proc", at_least=0.9),
    Target("reliability on ≥ 70 % of minimal (2 processes)", "redrive-pg", "jobs/s 2 proc",
           "redrive-pg-minimal", "jobs/s 2 proc", at_least=0.7),
    Target("SQLite ≥ 50 % of the bare SQLite loop", "redrive-sqlite", "jobs/s 1 proc",
           "bare-sqlite", "jobs/s 1 proc", at_least=0.5),
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
        out += ["", "## Targets (ratios within this run)", "", "| target | ratio | met |", "|---|---:|:---:|"]
        for t in TARGETS:
            a, b = self._cell(t.system, t.column), self._cell(t.peer, t.peer_column)
            if a is None or b is None:
                continue
            ratio = a / b
            met = (t.at_least is None or ratio >= t.at_least) and (t.at_most is None or ratio <= t.at_most)
            out.append(f"| {t.what} | {ratio:.2f} | {'yes' if met else '**no**'} |")
        if self.backlog:
            b = self.backlog
            lo, hi = p.window
            m1, m2 = p.memory_marks
            ratio = b["big jobs/s"] / b["small jobs/s"]
            out.append(f"| {p.big_backlog:,}-job backlog ≥ 80 % of {hi:,}-job "
                       f"(jobs {lo:,}–{hi:,} of each, runs taking turns, medians; 1 process) | {ratio:.2f} | "
                       f"{'yes' if ratio >= 0.8 else '**no**'} |")
            scrape = b[f"scrape ms at {p.big_backlog:,} finished"]
            floor = b[f"scrape ms at {hi:,} finished"]
            out.append(f"| /metrics scrape with {p.big_backlog:,} finished jobs under 50 ms "
                       f"({scrape:.1f} ms; {floor:.1f} ms with {hi:,}: ratio shown) | {scrape / floor:.2f} | "
                       f"{'yes' if scrape < 50 else '**no**'} |")
            growth = b[f"RSS MiB at {m2}"] / b[f"RSS MiB at {m1}"]
            out.append(f"| worker RSS at {m2:,} jobs within 10 % of at {m1:,} | {growth:.2f} | "
                       f"{'yes' if growth <= 1.10 else '**no**'} |")
            out += ["", "Backlog run (redrive-pg, 1 worker process): "
                    + ", ".join(f"{k} {_fmt(v)}" for k, v in b.items()) + "."]
        if self.dashboard:
            d, jobs = self.dashboard, p.dashboard_jobs
            floor = d["login page ms"]
            for page in ("overview", "first jobs page"):
                took = d[f"{page} ms"]
                out.append(f"| dashboard {page} with {jobs:,} jobs under 200 ms ({took:.1f} ms; "
                           f"the login page, which reads nothing, {floor:.1f} ms: ratio shown) | {took / floor:.2f} | "
                           f"{'yes' if took < 200 else '**no**'} |")
        if self.matchmaking:
            m, users = self.matchmaking, p.matchmaking_users
            noop = self._cell("redrive-pg", "jobs/s 2 proc")
            drained = users / m["drain s"]
            out += ["", f"Matchmaking's large batch: one 09:00 firing for {users:,} users in one time zone, "
                    f"enqueued by the scheduler in {m['firing enqueue s']:.1f} s "
                    f"({users / m['firing enqueue s']:,.0f} jobs/s; the same number of keyed jobs through "
                    f"`enqueue_many` alone: {m['keyed enqueue_many floor s']:.1f} s, ratio "
                    f"{m['firing enqueue s'] / m['keyed enqueue_many floor s']:.2f}), drained by 2 worker processes "
                    f"running the example's job in {m['drain s']:.0f} s ({drained:,.0f} jobs/s"
                    + (f"; no-op jobs, 2 processes: {noop:,.0f} jobs/s" if noop else "") + ")."]
        out += ["", "Versions: " + ", ".join(f"{n} {_version(n)}" for n in PACKAGES if _version(n)) + "."]
        return "\n".join(out) + "\n"


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
