"""Worker processes for fault tests: start, signal, and read what they did."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from redrive.testing import wait_for

REPO = Path(__file__).resolve().parents[2]
APP = "tests.apps.drain:app"


class WorkerProcess:
    def __init__(self, url: str, log_dir: Path, *options: str, app: str = APP,
                 env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> None:
        """``prefix`` goes before the Python command, such as ``faketime +60s``."""
        self.log_dir = log_dir
        env = {**os.environ, "REDRIVE_DATABASE_URL": url, "REDRIVE_TEST_LOG_DIR": str(log_dir),
               "PYTHONPATH": str(REPO), **(env or {})}
        self._stderr_path = log_dir / f"worker-{len(list(log_dir.glob('worker-*.err')))}.err"
        self._stderr = open(self._stderr_path, "w")
        self.process = subprocess.Popen(
            [*prefix, sys.executable, "-m", "redrive", "worker", app, *options],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=self._stderr,
            # A group of its own: a prefix such as faketime forks the worker,
            # and killing the prefix alone would leave the worker running.
            start_new_session=True,
        )
        self.pid = self.process.pid

    @property
    def log(self) -> str:
        return self._stderr_path.read_text()

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    def wait_started(self, timeout: float = 30) -> None:
        """Until the worker says it started (or it exits, or ``timeout``)."""
        try:
            wait_for(lambda: self.process.poll() is not None or " started: " in self.log, timeout=timeout, every=0.05)
        except AssertionError:
            pass  # stop() signals it anyway, and its exit code tells

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM once the worker is up (a stop asked while Python still
        imports redrive is the default action's: exit -15), then its exit code."""
        self.wait_started(timeout)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self._stderr.close()

    def kill(self) -> None:
        """SIGKILL to the worker and whatever it runs under (its process group)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.process.poll() is None:
            self.process.wait(timeout=10)
        self._stderr.close()


def kill_and_show(workers: list[WorkerProcess]) -> None:
    """Kill what a test started and print the end of each one's log: pytest
    shows a teardown's output only when the test failed, and a failure that
    happens once in many runs can then be read from CI's output."""
    for n, worker in enumerate(workers):
        worker.kill()
        print(f"--- worker {n} (pid {worker.process.pid}), the end of its log ---\n{worker.log[-4000:]}")


def executions(log_dir: Path, *, kind: str = "exec") -> Counter[str]:
    """How many times each key's task body ran (``kind="began"``: began, for
    the tasks that log that too), across every worker process."""
    counts: Counter[str] = Counter()
    for path in log_dir.glob(f"{kind}-*.log"):
        for line in path.read_text().splitlines():
            counts[line.split()[0]] += 1
    return counts
