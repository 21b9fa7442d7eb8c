"""A three-stage pipeline after seed 001 (fetch, llm, notify) for worker-process
tests. The llm stage calls a local scripted upstream (REDRIVE_TEST_UPSTREAM);
every stage body appends "key stage attempt" to its process's log file."""

from __future__ import annotations

import os
from datetime import timedelta

import httpx

from redrive import App, Fixed, Stage, add_context, current_job, stage

app = App()

RETRY_DELAY = timedelta(seconds=1)
FAST = Fixed([timedelta(milliseconds=100)])


def _record(key: str, what: str) -> None:
    with open(os.path.join(os.environ["REDRIVE_TEST_LOG_DIR"], f"exec-{os.getpid()}.log"), "a") as log:
        log.write(f"{key}:{what} {current_job().attempts}\n")


def fetch(key: str) -> dict:
    _record(key, "fetch")
    return {"page": f"text of {key}"}


def call_llm(key: str, page: dict, api_key: str) -> dict:
    _record(key, "llm")
    # The reviewer's address in the URL ends up in httpx's error message and
    # the stack: redaction must take it out before anything is stored.
    response = httpx.post(
        f"{os.environ['REDRIVE_TEST_UPSTREAM']}/llm/{key}?reviewer=alice@example.com",
        json=page, headers={"Authorization": f"Bearer {api_key}"}, timeout=5,
    )
    response.raise_for_status()
    return {"verdict": f"{key} reads well"}


def notify(key: str, critique: dict) -> bool:
    _record(key, "notify")
    return True


@app.task(stages=[
    Stage("fetch", backoff=FAST),
    Stage("llm", max_attempts=3, backoff=Fixed([RETRY_DELAY])),
    Stage("notify", backoff=FAST),
])
def criticize(key: str, api_key: str) -> dict:
    add_context(request_id=f"req-{key}", api_key=api_key)
    page = stage("fetch", fetch, key)
    critique = stage("llm", call_llm, key, page, api_key)
    stage("notify", notify, key, critique)
    return critique
