"""Planted secrets (an API key, a card number, an email address, a PEM key, a
Slack token) put into a job's arguments and its error, then every readable
route called as the operator and as the owner: none of them comes back."""

from __future__ import annotations

import asyncio

from redrive import App, Status
from tests.canaries import CANARIES, MARKS
from tests.http.conftest import as_
from tests.integration.test_worker_in_process import _run_until


def test_no_planted_secret_leaves_the_server(api, api_app: App) -> None:
    alice, ops = as_("alice", api), as_("operator", api)
    kept = alice.post("/api/v1/jobs", json={"task": "greet", "args": [" ".join(CANARIES)]}).json()
    failed = alice.post("/api/v1/jobs", json={"task": "fail", "args": [" | ".join(CANARIES)]}).json()
    asyncio.run(_run_until(api_app, lambda: all(api_app.client.job(j["id"]).status in (Status.SUCCEEDED,
                                                                                      Status.FAILED)
                                                for j in (kept, failed))))
    letter = ops.get("/api/v1/dead-letters").json()["items"][0]["id"]
    paths = ["/api/v1/jobs", f"/api/v1/jobs/{kept['id']}", f"/api/v1/jobs/{failed['id']}",
             "/api/v1/dead-letters", f"/api/v1/dead-letters/{letter}", "/api/v1/dead-letters/facets",
             "/api/v1/queues", "/api/v1/breakers", "/api/v1/schedules", "/api/v1/outbox"]
    answers = [client.get(path) for path in paths for client in (ops, alice)]
    answers.append(alice.post("/api/v1/jobs", json={"task": "greet", "args": [" ".join(CANARIES)]}))
    assert any(a.status_code == 200 for a in answers)
    leaked = [(a.request.url.path, mark) for a in answers for mark in MARKS if mark in a.text]
    assert not leaked, leaked
    assert "[PEM]" in alice.get(f"/api/v1/jobs/{failed['id']}").text  # redacted, not dropped
