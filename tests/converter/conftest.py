"""The converter example running for real: its gateway, its web service and
its workers as separate processes on 127.0.0.1, configured through the
environment as a deployment would be, on SQLite or PostgreSQL."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "converter"
sys.path.insert(0, str(EXAMPLE))  # the tests make sample PDFs with the example's own helper

FAST = {  # the design's knobs, scaled down so a test takes seconds, not minutes
    "RETRY_BASE_DELAY_MS": "400", "RETRY_JITTER_MAX_MS": "200", "GATEWAY_TIMEOUT_MS": "3000",
    "CIRCUIT_WINDOW": "4", "CIRCUIT_FAIL_THRESHOLD": "50", "CIRCUIT_COOLDOWN_MS": "1000",
    "WORKER_LEASE_TTL_SEC": "30", "WORKER_CONCURRENCY": "4", "REDRIVE_WORKER_POLL_INTERVAL": "0.2",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Converter:
    """The example's processes; each is stopped (its whole group) at the end."""

    def __init__(self, tmp_path: Path, database_url: str, **env: str) -> None:
        self.tmp = tmp_path
        self.env = {**os.environ, "PYTHONPATH": f"{EXAMPLE}{os.pathsep}{REPO / 'src'}",
                    "DATABASE_URL": database_url, "UPLOADS_DIR": str(tmp_path / "uploads"),
                    "RESULTS_DIR": str(tmp_path / "results"), **FAST, **env}
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self._open: list[Any] = []  # log files and clients, closed by stop()
        self.gateway_port = _free_port()
        self.env["GATEWAY_URL"] = f"http://127.0.0.1:{self.gateway_port}"
        self.web_url = ""

    def _start(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.tmp / f"{name}-{len(self.procs)}.log", "w")
        self._open.append(log)
        proc = subprocess.Popen([sys.executable, "-m", "converter", *args], env={**self.env, **(env or {})},
                                cwd=self.tmp, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((name, proc))
        return proc

    def gateway(self, *, wait: bool = True) -> subprocess.Popen:
        proc = self._start("gateway", "gateway", "--port", str(self.gateway_port))
        if wait:
            _until(lambda: _answers(f"{self.env['GATEWAY_URL']}/health"), what="the gateway")
        return proc

    def web(self) -> str:
        port = _free_port()
        self._start("web", "web", "--port", str(port))
        self.web_url = f"http://127.0.0.1:{port}"
        _until(lambda: _answers(f"{self.web_url}/api/jobs"), what="the web service")
        return self.web_url

    def start(self) -> httpx.Client:
        """The gateway and the web service, started side by side; a user of the service."""
        self.gateway(wait=False)
        self.web()
        _until(lambda: _answers(f"{self.env['GATEWAY_URL']}/health"), what="the gateway")
        return self.browser()

    def worker(self, **env: str) -> subprocess.Popen:
        return self._start("worker", "worker", env=env)

    def browser(self) -> httpx.Client:
        """A user: a client that keeps its session cookie."""
        client = httpx.Client(base_url=self.web_url, timeout=60)
        self._open.append(client)
        return client

    def mode(self, mode: str, **extra: Any) -> None:
        httpx.post(f"{self.env['GATEWAY_URL']}/admin/mode", json={"mode": mode, **extra}, timeout=5)

    def calls(self, key: str | None = None) -> list[dict]:
        found = httpx.get(f"{self.env['GATEWAY_URL']}/admin/calls", timeout=5).json()
        return [c for c in found if key is None or c["key"] == key]

    def log(self, name: str) -> str:
        return "".join(p.read_text() for p in sorted(self.tmp.glob(f"{name}-*.log")))

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


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code < 500
    except httpx.HTTPError:
        return False


def _until(condition, timeout: float = 30, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen in {timeout} s"
        time.sleep(0.05)


def job_of(browser: httpx.Client, job_id: str) -> dict:
    return browser.get(f"/api/jobs/{job_id}").json()


def wait_status(browser: httpx.Client, job_id: str, *statuses: str, timeout: float = 60) -> dict:
    seen: dict = {}

    def reached() -> bool:
        seen.update(job_of(browser, job_id))
        return seen.get("status") in statuses

    _until(reached, timeout, f"job {job_id} reaching {statuses} (last seen {seen.get('status')})")
    return seen


def upload(browser: httpx.Client, pdf: bytes, mapping: str = "invoice", filename: str = "doc.pdf") -> httpx.Response:
    return browser.post("/api/upload", files={"file": (filename, pdf, "application/pdf")}, data={"mapping": mapping})


BOTH_STORES = pytest.mark.parametrize("converter_db", ["sqlite", "postgres"], indirect=True)


@pytest.fixture(params=["sqlite"])
def converter_db(request, tmp_path) -> str:
    """SQLite, the converter's default; ``@BOTH_STORES`` runs a test on PostgreSQL too."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'converter.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def converter(tmp_path, converter_db) -> Iterator[Converter]:
    running = Converter(tmp_path, converter_db)
    yield running
    running.stop()

