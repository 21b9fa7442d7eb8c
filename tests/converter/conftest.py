"""The converter example running for real: its gateway, its web service and
its workers as separate processes on 127.0.0.1, configured through the
environment as a deployment would be, on SQLite or PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from redrive import Actor, Admin
from redrive.testing import wait_for
from tests.examples import REPO, Example

EXAMPLE = REPO / "examples" / "converter"
sys.path.insert(0, str(EXAMPLE))  # the tests make sample PDFs with the example's own helper

FAST = {  # the design's knobs, scaled down so a test takes seconds, not minutes
    "RETRY_BASE_DELAY_MS": "400", "RETRY_JITTER_MAX_MS": "200", "GATEWAY_TIMEOUT_MS": "3000",
    "CIRCUIT_WINDOW": "4", "CIRCUIT_FAIL_THRESHOLD": "50", "CIRCUIT_COOLDOWN_MS": "1000",
    "WORKER_LEASE_TTL_SEC": "30", "WORKER_CONCURRENCY": "4", "REDRIVE_WORKER_POLL_INTERVAL": "0.2",
}


class Converter(Example):
    """The converter's processes; each is stopped (its whole group) at the end."""

    def __init__(self, tmp_path: Path, database_url: str, **env: str) -> None:
        super().__init__("converter", tmp_path, {
            "DATABASE_URL": database_url, "UPLOADS_DIR": str(tmp_path / "uploads"),
            "RESULTS_DIR": str(tmp_path / "results"), **FAST, **env})
        self.web_url = ""

    def gateway(self) -> str:
        """The gateway, back on its own port if it ran before (a restart),
        else on one the system picks; its URL, which the other parts call."""
        known = self.env.get("GATEWAY_URL")
        port = int(known.rsplit(":", 1)[1]) if known else 0
        self.env["GATEWAY_URL"] = self.start_server("gateway", port=port)
        return self.env["GATEWAY_URL"]

    def web(self) -> str:
        self.web_url = self.start_server("web")
        return self.web_url

    def serve(self) -> httpx.Client:
        """The gateway, then the web service; a user of the service."""
        self.gateway()
        self.web()
        return self.browser()

    def worker(self, **env: str) -> subprocess.Popen:
        return self.start("worker", env=env)

    def browser(self) -> httpx.Client:
        """A user: a client that keeps its session cookie."""
        return self.keep(httpx.Client(base_url=self.web_url, timeout=60))

    def mode(self, mode: str, **extra: Any) -> None:
        httpx.post(f"{self.env['GATEWAY_URL']}/admin/mode", json={"mode": mode, **extra}, timeout=5)

    def operator(self) -> Admin:
        """An operator of this converter's redrive (its own app, so its gateway breaker is known)."""
        from converter.settings import Settings
        from converter.tasks import make_app

        app = self.keep(make_app(Settings(database_url=self.env["DATABASE_URL"])))
        return app.admin(Actor.operator("test"))

    def calls(self, key: str | None = None) -> list[dict]:
        found = httpx.get(f"{self.env['GATEWAY_URL']}/admin/calls", timeout=5).json()
        return [c for c in found if key is None or c["key"] == key]


def job_of(browser: httpx.Client, job_id: str) -> dict:
    return browser.get(f"/api/jobs/{job_id}").json()


def wait_status(browser: httpx.Client, job_id: str, *statuses: str, timeout: float = 60) -> dict:
    seen: dict = {}

    def reached() -> bool:
        seen.update(job_of(browser, job_id))
        return seen.get("status") in statuses

    wait_for(reached, timeout=timeout, what=f"job {job_id} reaching {statuses} (last seen {seen.get('status')})")
    return seen


def upload(browser: httpx.Client, pdf: bytes, mapping: str = "invoice", filename: str = "doc.pdf") -> httpx.Response:
    return browser.post("/api/upload", files={"file": (filename, pdf, "application/pdf")}, data={"mapping": mapping})


@pytest.fixture
def converter(tmp_path, example_db) -> Iterator[Converter]:
    running = Converter(tmp_path, example_db)
    yield running
    running.stop()

