"""Running a reference system from ``examples/`` for real: each of its parts
a process of its own (``python -m <package> <part>``) on 127.0.0.1,
configured through the environment as a deployment would be, each in a
process group of its own so a stop or a SIGKILL reaches all of it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from redrive.testing import wait_for

REPO = Path(__file__).resolve().parents[1]

# Runs a test on PostgreSQL as well as on SQLite (the ``example_db`` fixture).
BOTH_STORES = pytest.mark.parametrize("example_db", ["sqlite", "postgres"], indirect=True)


# The first address a server part prints once it listens: every part that
# serves HTTP takes ``--port 0`` (a port the system picks) and says which.
_LISTENING = re.compile(r"http://127\.0\.0\.1:[1-9][0-9]*")


@contextmanager
def refusing_port(port: int = 0) -> Iterator[int]:
    """A port (0: one the system picks) bound and never listened on: a
    connection to it is refused, as by a server that is down, and no other
    server takes it meanwhile. A part started on it (``start_server(...,
    port=)``) can listen there while it is held: theirs and this socket both
    allow the address's reuse."""
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", port))
        yield held.getsockname()[1]


class Example:
    """One example's processes; ``stop()`` ends them all (SIGTERM, then SIGKILL)."""

    def __init__(self, package: str, tmp_path: Path, env: dict[str, str]) -> None:
        self.package, self.tmp = package, tmp_path
        self.env = {**os.environ, "PYTHONPATH": f"{REPO / 'examples' / package}{os.pathsep}{REPO / 'src'}", **env}
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self._open: list[Any] = []  # log files and clients, closed by stop()

    def start(self, part: str, *args: str, env: dict[str, str] | None = None,
              command: list[str] | None = None) -> subprocess.Popen:
        """``python -m PACKAGE PART ARGS``, or ``command`` and ARGS under the name ``part``."""
        log = open(self.tmp / f"{part}-{len(self.procs)}.log", "w")
        self._open.append(log)
        argv = [*(command or [sys.executable, "-m", self.package, part]), *args]
        proc = subprocess.Popen(argv, env={**self.env, **(env or {})},
                                cwd=self.tmp, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((part, proc))
        return proc

    def start_server(self, part: str, *args: str, port: int = 0, env: dict[str, str] | None = None,
                     command: list[str] | None = None, timeout: float = 30) -> str:
        """A part that serves HTTP, on ``port`` (0: one the system picks): its
        base URL, once it says it listens."""
        proc = self.start(part, *args, "--port", str(port), env=env, command=command)
        log = self.tmp / f"{part}-{len(self.procs) - 1}.log"

        def listening() -> str | None:
            assert proc.poll() is None, f"{part} exited with {proc.returncode}: {log.read_text()[-2000:]}"
            found = _LISTENING.search(log.read_text())
            return found.group(0) if found else None

        return wait_for(listening, timeout=timeout, every=0.05, what=f"{part} listening")

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
