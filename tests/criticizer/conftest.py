"""The criticizer example running for real: its services' stand-ins and its
workers as processes of their own; operators acting through redrive's own
CLI (``redrive dead ...``) and dashboard (``redrive serve``) on the same
database."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest

from redrive import Actor, Admin
from redrive.testing import wait_for
from tests.examples import REPO, Example

sys.path.insert(0, str(REPO / "examples" / "criticizer"))

from criticizer.pipeline import make_app
from criticizer.settings import Settings

# Planted secrets: the tokens the worker sends; none may show up anywhere operators look.
TOKENS = {"SOURCE_TOKEN": "ghp_SourceToken0123456789abcdefABCDEF01",
          "LLM_API_KEY": "sk-proj-LlmKey0123456789abcdefghijklmnopqrst",
          "WEBHOOK_TOKEN": "xoxb-webhook-token-0123456789-abcdefghij"}
FAST = {"BACKOFF_INITIAL_S": "0.05", "BACKOFF_MAX_S": "0.2", "CALL_TIMEOUT_S": "1",
        "REDRIVE_WORKER_POLL_INTERVAL": "0.2", **TOKENS}
OPERATOR_TOKEN = "ops-token-for-the-criticizer-tests"


class Criticizer(Example):
    def __init__(self, tmp_path: Path, database_url: str) -> None:
        super().__init__("criticizer", tmp_path, {
            "DATABASE_URL": database_url, "SNAPSHOTS_DIR": str(tmp_path / "snapshots"), **FAST})
        self.url, self.database_url = "", database_url
        self.app = make_app(Settings.from_env({k: v for k, v in self.env.items() if k.isupper()}))
        self.admin: Admin = self.app.admin(Actor.operator("test"))

    def services(self) -> None:
        """The source, LLM and webhook stand-ins (one server); the workers started after it call them."""
        self.url = self.start_server("services", *(f"--{s}-token={TOKENS[k]}" for s, k in (
            ("source", "SOURCE_TOKEN"), ("llm", "LLM_API_KEY"), ("webhook", "WEBHOOK_TOKEN"))))
        self.env.update(SOURCE_URL=self.url, LLM_URL=self.url, WEBHOOK_URL=f"{self.url}/hooks")

    def worker(self, **env: str) -> subprocess.Popen:
        return self.start("worker", env=env)

    def script(self, service: str, key: str, *answers: str, **extra: Any) -> None:
        httpx.post(f"{self.url}/admin/script", json={"service": service, "key": key, "answers": list(answers),
                                                     **extra}, timeout=5).raise_for_status()

    def change(self, key: str, title: str, diff: str) -> None:
        httpx.post(f"{self.url}/admin/change", json={"id": key, "title": title, "diff": diff},
                   timeout=5).raise_for_status()

    def calls(self, service: str, key: str) -> list[dict[str, Any]]:
        return [c for c in httpx.get(f"{self.url}/admin/calls", timeout=5).json()
                if c["service"] == service and c["key"] == key]

    def messages(self, key: str) -> list[dict[str, Any]]:
        return [m for m in httpx.get(f"{self.url}/admin/messages", timeout=5).json() if m["change_id"] == key]

    def submit(self, key: str, channel: str = "reviews", requested_by: str = "") -> UUID:
        return self.app.enqueue("criticize", args=[key, channel], kwargs={"requested_by": requested_by}).job.id

    def wait(self, job_id: UUID, *statuses: str, timeout: float = 60) -> Any:
        wait_for(lambda: self.admin.job(job_id).status.value in statuses,
                 timeout=timeout, what=f"job {job_id} reaching {statuses}")
        return self.admin.job(job_id)

    def redrive(self, *args: str) -> subprocess.CompletedProcess:
        """An operator at a terminal: redrive's CLI on the criticizer's database."""
        done = subprocess.run([sys.executable, "-m", "redrive", "--database-url", self.database_url, *args],
                              env={**os.environ, "PYTHONPATH": str(REPO / "src")}, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        return done

    def dashboard(self) -> httpx.Client:
        """An operator in a browser: redrive's dashboard, logged in."""
        base = self.start_server("redrive", "serve", env={"REDRIVE_API_TOKENS": f"{OPERATOR_TOKEN}=operator:ops"},
                                 command=[sys.executable, "-m", "redrive", "--database-url", self.database_url])
        browser = self.keep(httpx.Client(base_url=base, timeout=30, follow_redirects=True, headers={"Origin": base}))
        browser.post("/login", data={"token": OPERATOR_TOKEN})
        return browser

    def stop(self) -> None:
        super().stop()
        self.admin.close()
        self.app.close()


def csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "no form on the page"
    return found.group(1)


@pytest.fixture
def criticizer(tmp_path, example_db) -> Iterator[Criticizer]:
    running = Criticizer(tmp_path, example_db)
    try:
        yield running
    finally:
        running.stop()
