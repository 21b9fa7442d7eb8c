"""``python -m bench.processes`` (or ``bench/run-processes``): worker
processes under one supervisor, against one process, two separate workers and
Celery's prefork pool, in one run on PostgreSQL (docs/performance.md).

- CPU-bound sync jobs (about 10 ms of pure Python each, ``probe.burn``):
  ``--processes 2`` against ``--processes 1`` (threads sharing one GIL) and
  against Celery ``--pool prefork --concurrency 2`` on Redis.
- No-op async jobs: ``--processes 2`` against two ``redrive worker``
  processes started separately (what a supervisor costs), with the CPU
  each job takes in the workers and in PostgreSQL, and the rate at which
  that CPU would fill every core.

Each figure is the median of the repeats; the configurations take turns in
each repeat so the machine's drift hits them alike.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import probe
from bench.harness import Progress, Workers, cpu_us_per_job, throughput
from bench.systems.celery import Celery
from bench.systems.celery import app as celery_app
from bench.systems.redrive import CONCURRENCY, Redrive

CPU_JOBS = 1000
NOOP_JOBS = 30_000


def _redrive_argv(*flags: str) -> list[str]:
    return [sys.executable, "-m", "redrive", "--log-level", "warning", "worker", "bench.systems.redrive_jobs:app",
            "--poll-interval", "1", *flags]


def _drain(argv: list[str], count: int, jobs: int) -> list[Progress]:
    with Workers(argv, count) as workers:
        return workers.wait(jobs, budget_s=60, timeout_s=180)


def _rate(argv: list[str], count: int, jobs: int) -> float:
    return throughput(_drain(argv, count, jobs))


def _postgres_cpu_s() -> float:
    """CPU seconds the PostgreSQL server's processes have spent, those it
    has reaped included (a connection's backend exits when it closes)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if (stat.parent / "comm").read_text().strip() != "postgres":
                continue
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return total / tick


def _ceiling() -> float:
    """The floor's mirror: jobs/s if every core did nothing but the jobs' own
    work (``probe.burn`` timed here, in one thread, times the cores)."""
    start = time.perf_counter()
    for _ in range(50):
        probe.burn()
    return (os.cpu_count() or 1) * 50 / (time.perf_counter() - start)


def _burns(n: int) -> int:
    for _ in range(n):
        probe.burn()
    return n


def _hardware_speedup() -> float:
    """What two processes doing nothing but the jobs' work reach against
    one, on this machine (its two vCPUs may share a core): the floor under
    the --processes ratio."""
    start = time.perf_counter()
    _burns(200)
    one = 200 / (time.perf_counter() - start)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_burns, [1, 1])  # started before the clock
        start = time.perf_counter()
        pool.map(_burns, [100, 100])
        two = 200 / (time.perf_counter() - start)
    return two / one


def run(repeats: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="redrive-bench-") as work:
        redrive = Redrive("pg", Path(work), profile="minimal")
        celery = Celery()
        for _ in range(repeats):
            # Each at redrive's default concurrency (10 a process), as Celery runs at its own prefetch
            for name, flags in (("cpu: --processes 1", ["--processes", "1"]),
                                ("cpu: --processes 2", ["--processes", "2"]),
                                ("cpu: --processes 1 -c 1", ["--processes", "1", "-c", "1"]),
                                ("cpu: --processes 2 -c 1", ["--processes", "2", "-c", "1"])):
                redrive.reset()
                redrive.enqueue(CPU_JOBS, CPU_JOBS, task="cpu")
                before = _postgres_cpu_s()
                samples.setdefault(name, []).append(_rate(_redrive_argv(*flags), 1, CPU_JOBS))
                samples.setdefault(f"{name}: PostgreSQL CPU ms a job", []).append(
                    (_postgres_cpu_s() - before) * 1000 / CPU_JOBS)
            celery.reset()
            with celery_app.producer_or_acquire() as producer:
                for _ in range(CPU_JOBS):
                    celery_app.tasks["cpu"].apply_async(producer=producer)
            argv = [sys.executable, "-m", "celery", "-A", "bench.systems.celery:app", "worker", "--pool", "prefork",
                    "--concurrency", "2", "--loglevel", "warning", "--without-gossip", "--without-mingle",
                    "--without-heartbeat"]
            samples.setdefault("cpu: Celery prefork 2", []).append(_rate(argv, 1, CPU_JOBS))
            samples.setdefault("cpu: the machine's ceiling", []).append(_ceiling())
            samples.setdefault("cpu: two bare processes / one (x100)", []).append(100 * _hardware_speedup())
            for name, argv, count in (
                    ("noop: --processes 2", _redrive_argv("-c", str(CONCURRENCY), "--processes", "2"), 1),
                    ("noop: two separate workers", _redrive_argv("-c", str(CONCURRENCY)), 2)):
                redrive.reset()
                redrive.enqueue(NOOP_JOBS, 1000)
                before = _postgres_cpu_s()
                progress = _drain(argv, count, NOOP_JOBS)
                pg_us = (_postgres_cpu_s() - before) * 1e6 / sum(p.count for p in progress)
                samples.setdefault(name, []).append(throughput(progress))
                samples.setdefault(f"{name}: worker CPU µs a job", []).append(cpu_us_per_job(progress))
                samples.setdefault(f"{name}: PostgreSQL CPU µs a job", []).append(pg_us)
        redrive.close()
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.processes", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    samples = run(args.repeats)
    median = {name: statistics.median(values) for name, values in samples.items()}
    print("| configuration | jobs/s (median) |\n|---|---:|")
    for name, value in median.items():
        print(f"| {name} | {value:,.2f} |" if "CPU" in name else f"| {name} | {value:,.0f} |")
    cpu2, cpu1 = median["cpu: --processes 2"], median["cpu: --processes 1"]
    print(f"\n--processes 2 / --processes 1 (CPU-bound): {cpu2 / cpu1:.2f}x (target >= 1.8x)")
    print(f"  two bare processes doing only the work, against one: "
          f"{median['cpu: two bare processes / one (x100)'] / 100:.2f}x (the machine's own)")
    print(f"  the same at -c 1: {median['cpu: --processes 2 -c 1'] / median['cpu: --processes 1 -c 1']:.2f}x")
    ceiling = median["cpu: the machine's ceiling"]
    for name in ("cpu: --processes 2", "cpu: --processes 2 -c 1", "cpu: Celery prefork 2"):
        print(f"  {name}: {median[name] / ceiling:.0%} of the machine's ceiling")
    print(f"--processes 2 / Celery prefork 2 (CPU-bound): {cpu2 / median['cpu: Celery prefork 2']:.2f}x (target >= 1.0x)")
    # The floor under that ratio: the database's CPU for each job's claim and
    # write, on the cores the jobs run on (Celery on Redis, no results, spends none)
    job_ms = 1000 * (os.cpu_count() or 1) / median["cpu: Celery prefork 2"]  # a job's CPU, as Celery ran it
    pg_ms = median["cpu: --processes 2: PostgreSQL CPU ms a job"]
    print(f"  bound from PostgreSQL's CPU ({pg_ms:.2f} ms a job of {job_ms:.1f} ms): "
          f"{job_ms / (job_ms + pg_ms):.2f}x")
    apart = median["noop: two separate workers"]
    print(f"--processes 2 / two separate workers (no-op): {median['noop: --processes 2'] / apart:.2f}x "
          f"(target >= 1.1x)")
    # The floor under that ratio: a child is a worker, so it spends what a
    # worker spends on a job, and the cores cap how many such jobs a second
    # can take, whoever runs them.
    worker_us = median["noop: two separate workers: worker CPU µs a job"]
    pg_us = median["noop: two separate workers: PostgreSQL CPU µs a job"]
    cap = (os.cpu_count() or 1) * 1e6 / (worker_us + pg_us)
    print(f"  the CPU a job takes (a worker's {worker_us:.1f} µs and PostgreSQL's {pg_us:.1f}) caps "
          f"{os.cpu_count()} cores at {cap:,.0f} jobs/s: two separate workers reach {apart / cap:.0%} of it, "
          f"--processes 2 {median['noop: --processes 2'] / cap:.0%}; 1.1x two separate workers is "
          f"{1.1 * apart / cap:.0%} of it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
