"""The matching example running for real: the LLM provider's stand-in and
the workers as processes of their own, on SQLite or PostgreSQL, with a
local Slack webhook and SMTP server for the admins' notifications."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from redrive.testing import wait_for
from tests.examples import REPO, Example
from tests.fakes.slack import slack_webhook
from tests.fakes.smtp import smtp_server

sys.path.insert(0, str(REPO / "examples" / "matching"))  # the tests ingest and read through the example's own code

from matching.db import Db
from matching.documents import submit
from matching.settings import Settings
from matching.tasks import create_tables, make_app

FAST = {  # the design's durations, scaled down: 2/4/8 s become 0.1/0.2/0.4 s, 5 and 30 min 1 and 2 s
    "LLM_RETRY_DELAYS_S": "0.1,0.2,0.4", "REDELIVERY_DELAYS_S": "1,2", "LLM_TIMEOUT_S": "1",
    "WORKER_LEASE_TTL_SEC": "30", "REDRIVE_WORKER_POLL_INTERVAL": "0.2", "REDRIVE_ALERT_INTERVAL": "0.3s",
    "LLM_API_KEY": "sk-test-matching-0123456789abcdef",
}


class Matching(Example):
    def __init__(self, tmp_path: Path, database_url: str, slack: Any, inbox: Any) -> None:
        super().__init__("matching", tmp_path, {
            "DATABASE_URL": database_url,
            "SLACK_WEBHOOK_URL": slack.url, "SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(inbox.port),
            "SMTP_STARTTLS": "false", "EMAIL_TO": "ops@example.com", "ADMIN_URL": "https://admin.example.com",
            **FAST})
        self.slack, self.inbox = slack, inbox
        settings = Settings.from_env({k: v for k, v in self.env.items() if k.isupper()})
        create_tables(settings)
        self.app, _ = make_app(settings)
        self.db = Db(database_url)

    @property
    def provider_url(self) -> str:
        return self.env["LLM_URL"]

    def provider(self, port: int = 0) -> None:
        """The LLM provider's stand-in, on ``port`` (0: one the system picks);
        the workers started after it call it."""
        self.env["LLM_URL"] = self.start_server("provider", "--api-key", FAST["LLM_API_KEY"], port=port)

    def worker(self, *args: str, **env: str) -> Any:
        return self.start("worker", *args, env=env)

    def script(self, document: str, *answers: str, **extra: Any) -> None:
        httpx.post(f"{self.provider_url}/admin/script", json={"document": document, "answers": list(answers),
                                                              **extra}, timeout=5).raise_for_status()

    def calls(self, document: str) -> list[dict[str, Any]]:
        return [c for c in httpx.get(f"{self.provider_url}/admin/calls", timeout=5).json()
                if c["document"] == document]

    def submit(self, id: str, tenant: str, counterparty: str, body: str) -> None:
        submit(self.db, self.app, id=id, tenant=tenant, counterparty=counterparty, body=body)

    def document(self, id: str) -> dict[str, Any]:
        found = self.db.one("SELECT * FROM document WHERE id = %s", id)
        assert found is not None, id
        return found

    def edges(self, id: str) -> set[tuple[str, str]]:
        return {(r["document_a_id"], r["document_b_id"]) for r in self.db.rows(
            "SELECT document_a_id, document_b_id FROM document_match WHERE document_a_id = %s "
            "OR document_b_id = %s", id, id)}

    def wait_status(self, id: str, *statuses: str, timeout: float = 60) -> dict[str, Any]:
        wait_for(lambda: self.document(id)["matching_status"] in statuses,
                 timeout=timeout, what=f"document {id} reaching {statuses}")
        return self.document(id)

    def stop(self) -> None:
        super().stop()
        self.app.close()
        self.db.close()


@pytest.fixture
def matching(tmp_path, example_db) -> Iterator[Matching]:
    with slack_webhook() as slack, smtp_server() as inbox:
        running = Matching(tmp_path, example_db, slack, inbox)
        try:
            yield running
        finally:
            running.stop()
