"""Tasks for the many-hosts scenario (tests/integration/test_many_hosts.py).
REDRIVE_TEST_HOST names the host a worker runs on; REDRIVE_TEST_LOG_DIR is
shared by every host. Each result says which host and which attempt produced
it, so a test can tell an ending written by a run whose lease had been taken
over (a late write) from the one the fence let through.

``effect`` applies one outbox effect at a provider of the test's own: a file
per process, a line per send, holding the effect's key and the idempotency
token it was sent with. Like a real provider (Postmark, SendGrid), it applies
a token once and can be asked whether it has it."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

from redrive import App, Fixed, Intent, current_job, deliver

app = App()  # REDRIVE_DATABASE_URL comes from the environment

SENDS = "sends-*.log"
HOLD_S = 3.0


def _outcome(key: str) -> dict:
    job = current_job()
    with open(Path(os.environ["REDRIVE_TEST_LOG_DIR"]) / f"exec-{os.getpid()}.log", "a") as log:
        log.write(f"{key} {job.attempts}\n")
    return {"key": key, "host": os.environ["REDRIVE_TEST_HOST"], "attempt": job.attempts}


def sent(log_dir: Path) -> list[tuple[str, str]]:
    """Every send the provider received: (key, token), across processes."""
    return [tuple(line.split()) for path in log_dir.glob(SENDS)  # type: ignore[misc]
            for line in path.read_text().splitlines() if line]


@app.task(max_attempts=10, backoff=Fixed([timedelta(milliseconds=200)]))
def tick(key: str) -> dict:
    return _outcome(key)


@app.task(max_attempts=10, backoff=Fixed([timedelta(milliseconds=200)]))
def hold(key: str) -> dict:
    """Host b sleeps on its first run (long enough to be cut off mid-job); others end it at once."""
    host, job = os.environ["REDRIVE_TEST_HOST"], current_job()
    with open(Path(os.environ["REDRIVE_TEST_LOG_DIR"]) / f"began-{os.getpid()}.log", "a") as log:
        log.write(f"{key} {host}\n")
    if host == "b" and job.attempts == 1:
        time.sleep(HOLD_S)
    return _outcome(key)


@app.task(max_attempts=10, backoff=Fixed([timedelta(milliseconds=200)]))
def effect(key: str) -> dict:
    log_dir = Path(os.environ["REDRIVE_TEST_LOG_DIR"])

    def send(token: str) -> str:
        with open(log_dir / f"sends-{os.getpid()}.log", "a") as log:
            log.write(f"{key} {token}\n")
        return token

    def lookup(token: str, provider_id: str | None) -> str | None:
        return token if (key, token) in sent(log_dir) else None

    deliver([Intent(("effect", key), send, lookup)])
    return _outcome(key)
