"""SQLite's part of ``bench/run dbcost``: what a job costs the one file and
the processes that write it, for redrive on SQLite, the bare SQLite loop and
Huey, each on a fresh file in the bench's work directory.

Per job: the bytes its processes handed to ``write`` (``wchar`` in
``/proc/PID/io``: the WAL's frames and the pages checkpoints copy into the
database file; ``write_bytes`` would count the page cache's writeback,
which lands when the kernel likes), how many writes that took, and the
processes' CPU. Enqueue phases run in this process; processing phases in
the systems' own workers, read from ``/proc`` once the queue is drained and
before they are stopped. Each run also measures the floor under every
durable commit here: how long this disk takes to ``fsync`` one 4 KiB write
(a system that commits per job pays it per job, one that batches pays it
per batch), because that is what varies from hour to hour on a shared disk.
"""

from __future__ import annotations

import os
import resource
import sqlite3
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.harness import BenchError, Workers, tree

BATCH = 1000
FSYNC_SAMPLES = 200


@dataclass
class Use:
    """What one phase's processes did, for ``jobs`` jobs."""

    jobs: int
    written: int = 0  # bytes handed to write()
    writes: int = 0  # write calls
    cpu_s: float = 0.0
    seconds: float = 0.0

    def per_job(self, name: str) -> float:
        return getattr(self, name) / self.jobs


@dataclass
class SqliteSubject:
    name: str
    reset: Callable[[], None]
    enqueue: Callable[[int, int], None]
    worker_argv: Callable[[], list[str]]
    left: Callable[[], int]  # jobs not yet ended
    close: Callable[[], None]


def _io(pid: int | str = "self") -> tuple[int, int]:
    fields = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(fields["wchar"]), int(fields["syscw"])


def _cpu_s(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def in_process(jobs: int, phase: Callable[[], None]) -> Use:
    wchar, syscw = _io()
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    began = time.perf_counter()
    phase()
    took = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_SELF)
    wchar2, syscw2 = _io()
    return Use(jobs, wchar2 - wchar, syscw2 - syscw,
               after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime, took)


def processing(subject: SqliteSubject, jobs: int, timeout_s: float = 600) -> Use:
    """One worker process drains the queue; its tree's writes and CPU are read
    once nothing is left, before it is told to stop."""
    began = time.perf_counter()
    with Workers(subject.worker_argv(), 1) as workers:
        deadline = time.monotonic() + timeout_s
        while subject.left():
            if time.monotonic() > deadline:
                raise BenchError(f"{subject.name}: {subject.left()} of {jobs} jobs left after {timeout_s:.0f} s")
            time.sleep(0.01)
        took = time.perf_counter() - began
        use = Use(jobs, seconds=took)
        for pid in tree(workers.pids[0]):
            try:
                wchar, syscw = _io(pid)
                use.written, use.writes, use.cpu_s = use.written + wchar, use.writes + syscw, use.cpu_s + _cpu_s(pid)
            except OSError:
                continue  # a thread or child that just ended
    return use


def run(subject: SqliteSubject, jobs: int) -> dict[str, Use]:
    uses: dict[str, Use] = {}
    subject.reset()
    uses["enqueue 1000/call"] = in_process(jobs, lambda: subject.enqueue(jobs, BATCH))
    uses["processing 1 worker"] = processing(subject, jobs)
    single = max(1, jobs // 10)
    uses["enqueue 1/call"] = in_process(single, lambda: subject.enqueue(single, 1))
    return uses


def fsync_s(workdir: Path) -> float:
    """The median time to write and fsync 4 KiB in ``workdir`` here, now."""
    path = workdir / "fsync.probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        took = []
        for _ in range(FSYNC_SAMPLES):
            began = time.perf_counter()
            os.pwrite(fd, b"\0" * 4096, 0)
            os.fsync(fd)
            took.append(time.perf_counter() - began)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return statistics.median(took)


def _count(path: str, query: str) -> int:
    with sqlite3.connect(path, timeout=30) as conn:
        return int(conn.execute(query).fetchone()[0])


def redrive(workdir: Path) -> SqliteSubject:
    from bench.systems.redrive import Redrive

    system = Redrive("sqlite", workdir)
    db = str(workdir / "redrive.db")
    return SqliteSubject(system.name, system.reset, system.enqueue, system.worker_argv,
                         lambda: _count(db, "SELECT count(*) FROM redrive_job"), system.close)


def bare(workdir: Path) -> SqliteSubject:
    from bench.systems.bare_sqlite import BareSqlite

    system = BareSqlite(workdir)
    return SqliteSubject(system.name, system.reset, system.enqueue, system.worker_argv,
                         lambda: _count(system.path, "SELECT count(*) FROM job WHERE status <> 'done'"), system.close)


def huey(workdir: Path) -> SqliteSubject:
    from bench.systems.huey import Huey

    system = Huey(workdir)
    return SqliteSubject(system.name, system.reset, system.enqueue, system.worker_argv,
                         lambda: _count(system.path, "SELECT count(*) FROM task"), system.close)


SYSTEMS = {"redrive-sqlite": redrive, "bare-sqlite": bare, "huey": huey}
