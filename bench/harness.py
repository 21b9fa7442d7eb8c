"""Worker processes, their probes, and the clock: what every measurement shares."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class BenchError(RuntimeError):
    pass


@dataclass
class Progress:
    count: int
    first: float | None
    last: float | None
    marks: dict[int, tuple[float, int]]  # count -> (monotonic time, RSS KiB)
    latencies: list[float]
    cpu_s: float = 0.0  # the process's CPU seconds from its first job to its last CPU reading
    cpu_jobs: int = 0  # the jobs run from the first to that reading (the probe reads the CPU every 64th)


class Workers:
    """``count`` worker processes of one command, each in its own session so a
    stop reaches whatever it forks."""

    def __init__(self, argv: list[str], count: int, *, env: dict[str, str] | None = None,
                 marks: list[int] = ()) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="redrive-bench-"))
        self._env = {**os.environ, **(env or {}), "BENCH_PROBE_DIR": str(self._dir),
                     "BENCH_MARKS": ",".join(map(str, marks)),
                     "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        self._procs = []
        self._logs = []
        try:
            for i in range(count):
                log = open(self._dir / f"worker-{i}.log", "wb")
                self._logs.append(log)
                with _interrupts_held():
                    self._procs.append(subprocess.Popen(argv, env=self._env, cwd=ROOT, stdout=log,
                                                        stderr=subprocess.STDOUT, start_new_session=True))
        except BaseException:
            # An interrupt between two starts comes before ``with`` has
            # entered, so __exit__ would never stop the ones already running.
            self.stop()
            raise

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def progress(self) -> list[Progress]:
        found = []
        for path in self._dir.glob("*.json"):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # replaced while read; the next poll sees it
            found.append(progress_of(data))
        return found

    def wait(self, n: int, *, budget_s: float, timeout_s: float) -> list[Progress]:
        """Until ``n`` jobs ran, or ``budget_s`` after the first began (a slow
        system is measured on what it did in that time)."""
        deadline = time.monotonic() + timeout_s
        while True:
            progress = self.progress()
            done = sum(p.count for p in progress)
            firsts = [p.first for p in progress if p.first is not None]
            if done >= n or (firsts and time.monotonic() - min(firsts) >= budget_s):
                return progress
            for proc in self._procs:
                if proc.poll() is not None:
                    raise BenchError(f"a worker exited with {proc.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                raise BenchError(f"{done} of {n} jobs ran in {timeout_s:.0f} s: {self.log_tail()}")
            time.sleep(0.02)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def peak_rss_kib(self) -> int:
        """The largest peak RSS of one worker process (its own and its children's)."""
        return max(sum(_hwm_kib(pid) for pid in tree(p.pid)) for p in self._procs)

    def log_tail(self) -> str:
        lines = []
        for path in sorted(self._dir.glob("worker-*.log")):
            lines += path.read_text(errors="replace").splitlines()[-5:]
        return " | ".join(lines)[-1500:]

    def stop(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for log in self._logs:
            log.close()
        shutil.rmtree(self._dir, ignore_errors=True)  # logs and probe files: a failure already quoted them


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """An interrupt inside Popen, after the fork, would lose the child (no
    Popen object is returned to stop it): a SIGINT that comes meanwhile is
    raised again once the child is in the caller's hands. A handler, not a
    blocked mask: the child would inherit the mask."""
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            signal.raise_signal(signal.SIGINT)


def throughput(progress: list[Progress]) -> float:
    count = sum(p.count for p in progress)
    first = min(p.first for p in progress if p.first is not None)
    last = max(p.last for p in progress if p.last is not None)
    return count / (last - first) if last > first else float("nan")


def progress_of(data: dict) -> Progress:
    """A worker process's progress as its probe wrote it (``bench/probe.py``)."""
    read = data["cpu_last"] is not None  # none before its 64th job
    return Progress(data["count"], data["first"], data["last"], {int(k): tuple(v) for k, v in data["marks"].items()},
                    data["lat"], data["cpu_last"] - data["cpu_first"] if read else 0.0,
                    data["cpu_jobs"] - 1 if read else 0)


def cpu_us_per_job(progress: list[Progress]) -> float:
    """The workers' own CPU per job, in microseconds: every process's CPU
    time from its first job to its last reading, over the jobs run in between
    (a process with no second reading adds nothing to either)."""
    jobs = sum(p.cpu_jobs for p in progress)
    return sum(p.cpu_s for p in progress) / jobs * 1e6 if jobs > 0 else float("nan")


def tree(pid: int) -> list[int]:
    pids = [pid]
    for tid in _listdir(f"/proc/{pid}/task"):
        try:
            children = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            pids += tree(int(child))
    return pids


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
