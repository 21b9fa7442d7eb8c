"""Seed 002's converter against a gateway behind a shared circuit breaker, for
worker-process tests. The gateway is a local scripted upstream
(REDRIVE_TEST_UPSTREAM); successful conversions are logged per process."""

from __future__ import annotations

import os
from datetime import timedelta

import httpx

from redrive import App, BreakerMode, BreakerPolicy, Dependency, Fixed, current_job

POLICY = BreakerPolicy(failure_rate=50, window_calls=10, min_calls=4, wait=timedelta(seconds=2))


def _upstream() -> str:
    return os.environ["REDRIVE_TEST_UPSTREAM"]


def gateway_healthy() -> bool:
    return httpx.get(f"{_upstream()}/health", timeout=2).status_code == 200


app = App(dependencies=[
    Dependency("gateway", policy=POLICY, probe=gateway_healthy,
               probe_interval=timedelta(milliseconds=500)),
    Dependency("gateway_ff", policy=POLICY, mode=BreakerMode.FAIL_FAST, fail_code="UPSTREAM_5XX"),
])


def _convert(path: str, key: str) -> dict:
    response = httpx.post(f"{_upstream()}/{path}/{key}", timeout=5)
    response.raise_for_status()
    with open(os.path.join(os.environ["REDRIVE_TEST_LOG_DIR"], f"exec-{os.getpid()}.log"), "a") as log:
        log.write(f"{key} {current_job().attempts}\n")
    return {"key": key}


@app.task(dependencies=["gateway"], max_attempts=20, backoff=Fixed([timedelta(milliseconds=300)]))
def convert(key: str) -> dict:
    return _convert("convert", key)


@app.task(dependencies=["gateway_ff"], max_attempts=20, backoff=Fixed([timedelta(milliseconds=300)]))
def convert_fast(key: str) -> dict:
    return _convert("convert_ff", key)
