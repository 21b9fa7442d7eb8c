"""Review notifications (seed 001, second document) over the outbox, for
crash tests. REDRIVE_TEST_PROVIDER is the fake mail provider's URL;
REDRIVE_TEST_CRASH_AT names the point where a worker kills itself with
SIGKILL, once per job: before_send, after_send or after_record."""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from pathlib import Path

import httpx

from redrive import App, Fixed, Intent, deliver

app = App()  # REDRIVE_DATABASE_URL comes from the environment


def _crash_once(point: str, changelist: str) -> None:
    if os.environ.get("REDRIVE_TEST_CRASH_AT") != point:
        return
    marker = Path(os.environ["REDRIVE_TEST_LOG_DIR"]) / f"crashed-{point}-{changelist}"
    try:
        marker.touch(exist_ok=False)  # only the first worker to get here dies
    except FileExistsError:
        return
    os.kill(os.getpid(), signal.SIGKILL)


def email(changelist: str, recipient: str, version: int) -> Intent:
    provider = os.environ["REDRIVE_TEST_PROVIDER"]

    def send(token: str) -> str:
        _crash_once("before_send", changelist)
        response = httpx.post(f"{provider}/messages", headers={"Idempotency-Key": token}, timeout=5,
                              json={"to": recipient, "subject": f"Review of {changelist} v{version}"})
        response.raise_for_status()
        _crash_once("after_send", changelist)
        return response.json()["id"]

    def lookup(token: str, provider_id: str | None) -> str | None:
        response = httpx.get(f"{provider}/messages", params={"idempotency_key": token}, timeout=5)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return response.json()["id"]

    return Intent((changelist, recipient, version), send, lookup)


@app.task(max_attempts=8, backoff=Fixed([timedelta(milliseconds=200)]))
def notify_review(changelist: str, version: int, recipients: list[str]) -> dict:
    deliveries = deliver([email(changelist, r, version) for r in recipients])
    _crash_once("after_record", changelist)
    return {d.key[1]: d.how for d in deliveries}
