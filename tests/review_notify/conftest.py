"""The review_notify example running for real: the email provider's
stand-in, the review service and the workers as processes of their own."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from redrive import Actor, Admin, App
from tests.examples import REPO, Example, answers, free_port, until

sys.path.insert(0, str(REPO / "examples" / "review_notify"))

FAST = {"BACKOFF_INITIAL_S": "0.2", "BACKOFF_MAX_S": "0.5", "SEND_TIMEOUT_S": "5", "WORKER_LEASE_TTL_SEC": "30",
        "REDRIVE_WORKER_POLL_INTERVAL": "0.2", "PROVIDER_API_KEY": "re_test_0123456789abcdef"}


class Reviews(Example):
    def __init__(self, tmp_path: Path, database_url: str) -> None:
        self.provider_port = free_port()
        super().__init__("review_notify", tmp_path, {
            "DATABASE_URL": database_url, "PROVIDER_URL": f"http://127.0.0.1:{self.provider_port}", **FAST})
        self.provider_url = self.env["PROVIDER_URL"]
        self.app = App(database_url)
        self.admin: Admin = self.app.admin(Actor.operator("test"))
        self.service_url = ""

    def provider(self) -> None:
        self.start("provider", "--port", str(self.provider_port), "--api-key", FAST["PROVIDER_API_KEY"])
        until(lambda: answers(f"{self.provider_url}/health"), what="the email provider")

    def service(self) -> httpx.Client:
        port = free_port()
        self.start("service", "--port", str(port))
        self.service_url = f"http://127.0.0.1:{port}"
        until(lambda: answers(f"{self.service_url}/reviews/00000000-0000-0000-0000-000000000000"),
              what="the review service")
        return self.keep(httpx.Client(base_url=self.service_url, timeout=30))

    def worker(self, **env: str) -> subprocess.Popen:
        return self.start("worker", env=env)

    def mode(self, mode: str, **extra: Any) -> None:
        httpx.post(f"{self.provider_url}/admin/mode", json={"mode": mode, **extra}, timeout=5).raise_for_status()

    def block(self, recipient: str, *, unblock: bool = False) -> None:
        httpx.post(f"{self.provider_url}/admin/{'unblock' if unblock else 'block'}", json={"recipient": recipient},
                   timeout=5).raise_for_status()

    def sends(self) -> list[dict[str, Any]]:
        return httpx.get(f"{self.provider_url}/admin/sends", timeout=30).json()

    def messages(self) -> list[dict[str, Any]]:
        return httpx.get(f"{self.provider_url}/admin/messages", timeout=30).json()

    def delivered(self) -> Counter[tuple[str, str]]:
        """Messages the provider took, by (subject, recipient): one subject per changelist and version."""
        return Counter((m["subject"], m["to"]) for m in self.messages())

    def wait(self, job_id: str, *statuses: str, timeout: float = 60) -> Any:
        until(lambda: self.admin.job(job_id).status.value in statuses, timeout, f"job {job_id} reaching {statuses}")
        return self.admin.job(job_id)

    def stop(self) -> None:
        super().stop()
        self.admin.close()
        self.app.close()


@pytest.fixture
def reviews(tmp_path, example_db) -> Iterator[Reviews]:
    running = Reviews(tmp_path, example_db)
    try:
        yield running
    finally:
        running.stop()
