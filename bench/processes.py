"""``python -m bench.processes`` (or ``bench/run-processes``): worker
processes under one supervisor, against one process, two separate workers and
Celery's prefork pool, in one run on PostgreSQL (docs/performance.md).

- CPU-bound sync jobs (about 10 ms of pure Python each, ``probe.burn``):
  ``--processes 2`` against ``--processes 1`` (threads sharing one GIL) and
  against Celery ``--pool prefork --concurrency 2`` on Redis.
- No-op async jobs: ``--processes 2`` against two ``redrive worker``
  processes started separately (what a supervisor costs).

Each figure is the median of the repeats; the configurations take turns in
each repeat so the machine's drift hits them alike.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from bench.harness import Workers, throughput
from bench.systems.celery import Celery
from bench.systems.celery import app as celery_app
from bench.systems.redrive import CONCURRENCY, Redrive

CPU_JOBS = 600
NOOP_JOBS = 30_000


def _redrive_argv(*flags: str) -> list[str]:
    return [sys.executable, "-m", "redrive", "--log-level", "warning", "worker", "bench.systems.redrive_jobs:app",
            "--poll-interval", "1", *flags]


def _rate(argv: list[str], count: int, jobs: int) -> float:
    with Workers(argv, count) as workers:
        return throughput(workers.wait(jobs, budget_s=60, timeout_s=180))


def run(repeats: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="redrive-bench-") as work:
        redrive = Redrive("pg", Path(work), profile="minimal")
        celery = Celery()
        for _ in range(repeats):
            for name, flags in (("cpu: --processes 1 -c 2", ["--processes", "1", "-c", "2"]),
                                ("cpu: --processes 2 -c 1", ["--processes", "2", "-c", "1"])):
                redrive.reset()
                redrive.enqueue(CPU_JOBS, CPU_JOBS, task="cpu")
                samples.setdefault(name, []).append(_rate(_redrive_argv(*flags), 1, CPU_JOBS))
            celery.reset()
            with celery_app.producer_or_acquire() as producer:
                for _ in range(CPU_JOBS):
                    celery_app.tasks["cpu"].apply_async(producer=producer)
            argv = [sys.executable, "-m", "celery", "-A", "bench.systems.celery:app", "worker", "--pool", "prefork",
                    "--concurrency", "2", "--loglevel", "warning", "--without-gossip", "--without-mingle",
                    "--without-heartbeat"]
            samples.setdefault("cpu: Celery prefork 2", []).append(_rate(argv, 1, CPU_JOBS))
            for name, argv, count in (
                    ("noop: --processes 2", _redrive_argv("-c", str(CONCURRENCY), "--processes", "2"), 1),
                    ("noop: two separate workers", _redrive_argv("-c", str(CONCURRENCY)), 2)):
                redrive.reset()
                redrive.enqueue(NOOP_JOBS, 1000)
                samples.setdefault(name, []).append(_rate(argv, count, NOOP_JOBS))
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
        print(f"| {name} | {value:,.0f} |")
    cpu2, cpu1 = median["cpu: --processes 2 -c 1"], median["cpu: --processes 1 -c 2"]
    print(f"\n--processes 2 / --processes 1 (CPU-bound): {cpu2 / cpu1:.2f}x (target >= 1.8x)")
    print(f"--processes 2 / Celery prefork 2 (CPU-bound): {cpu2 / median['cpu: Celery prefork 2']:.2f}x (target >= 1.0x)")
    print(f"--processes 2 / two separate workers (no-op): "
          f"{median['noop: --processes 2'] / median['noop: two separate workers']:.2f}x (target >= 1.1x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
