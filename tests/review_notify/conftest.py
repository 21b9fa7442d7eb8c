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
from redrive.testing import wait_for
from tests.examples import REPO, Example

sys.path.insert(0, str(REPO / "examples" / "review_notify"))

FAST = {"BACKOFF_INITIAL_S": "0.2", "BACKOFF_MAX_S": "0.5", "SEND_TIMEOUT_S": "5", "WORKER_LEASE_TTL_SEC": "30",
        "REDRIVE_WORKER_POLL_INTERVAL": "0.2", "PROVIDER_API_KEY": "re_test_0123456789abcdef"}


class Reviews(Example):
    def __init__(self, tmp_path: Path, database_url: str) -> None:
        super().__init__("review_notify", tmp_path, {"DATABASE_URL": database_url, **FAST})
        self.provider_url = ""
        self.app = App(database_url)
        self.admin: Admin = self.app.admin(Actor.operator("test"))
        self.service_url = ""

    def provider(self) -> None:
        """The email provider's stand-in; the workers started after it send to it."""
        self.provider_url = self.start_server("provider", "--api-key", FAST["PROVIDER_API_KEY"])
        self.env["PROVIDER_URL"] = self.provider_url

    def service(self) -> httpx.Client:
        self.service_url = self.start_server("service")
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
        wait_for(lambda: self.admin.job(job_id).status.value in statuses,
                 timeout=timeout, what=f"job {job_id} reaching {statuses}")
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
