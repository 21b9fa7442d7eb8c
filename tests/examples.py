"""Running a reference system from ``examples/`` for real: each of its parts
a process of its own (``python -m <package> <part>``) on 127.0.0.1,
configured through the environment as a deployment would be, each in a
process group of its own so a stop or a SIGKILL reaches all of it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]

# Runs a test on PostgreSQL as well as on SQLite (the ``example_db`` fixture).
BOTH_STORES = pytest.mark.parametrize("example_db", ["sqlite", "postgres"], indirect=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code < 500
    except httpx.HTTPError:
        return False


def until(condition: Callable[[], Any], timeout: float = 30, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen in {timeout} s"
        time.sleep(0.05)


class Example:
    """One example's processes; ``stop()`` ends them all (SIGTERM, then SIGKILL)."""

    def __init__(self, package: str, tmp_path: Path, env: dict[str, str]) -> None:
        self.package, self.tmp = package, tmp_path
        self.env = {**os.environ, "PYTHONPATH": f"{REPO / 'examples' / package}{os.pathsep}{REPO / 'src'}", **env}
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self._open: list[Any] = []  # log files and clients, closed by stop()

    def start(self, part: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.tmp / f"{part}-{len(self.procs)}.log", "w")
        self._open.append(log)
        proc = subprocess.Popen([sys.executable, "-m", self.package, part, *args], env={**self.env, **(env or {})},
                                cwd=self.tmp, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((part, proc))
        return proc

    def run(self, part: str, *args: str) -> subprocess.CompletedProcess:
        """A part that runs to its end (a command); its output."""
        return subprocess.run([sys.executable, "-m", self.package, part, *args], env=self.env, cwd=self.tmp,
                              capture_output=True, text=True, timeout=60)

    def keep(self, closeable: Any) -> Any:
        self._open.append(closeable)
        return closeable

    def log(self, part: str) -> str:
        return "".join(p.read_text() for p in sorted(self.tmp.glob(f"{part}-*.log")))

    @staticmethod
    def kill(proc: subprocess.Popen) -> None:
        """SIGKILL, to the process and its group."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=15)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=5)
        while self._open:
            self._open.pop().close()
