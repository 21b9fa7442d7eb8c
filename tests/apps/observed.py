"""Tasks whose outcomes a test counts from outside: successes, failures
with two codes (their messages and a log line carry planted secrets), and
retries that then succeed. For the metrics and JSON-log tests."""

from __future__ import annotations

import logging
from datetime import timedelta

from redrive import App, Fixed, Permanent, Transient, current_job

app = App()  # REDRIVE_DATABASE_URL comes from the environment
log = logging.getLogger("observed")


@app.task
def fine(n: int) -> int:
    return n


@app.task
def refuse(code: str, why: str) -> None:
    log.warning("refusing: %s", why)  # as a careless task logs what it was given
    raise Permanent(f"refused: {why}", code=code)


@app.task(max_attempts=3, backoff=Fixed([timedelta(milliseconds=100)]))
def flaky(key: str) -> str:
    if current_job().attempts == 1:
        raise Transient(f"not yet: {key}", code="UPSTREAM_5XX")
    return key
