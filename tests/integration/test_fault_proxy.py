"""A dependency failing every way the classification table knows, through a
fault proxy in front of a real local service: each job ends with the code
its failure maps to, retried exactly when that code is retryable, and a
Retry-After is waited out."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest

from redrive import App, Fixed, Status
from redrive.core.taxonomy import DEFAULT_TAXONOMY
from tests.fakes.faults import fault_proxy
from tests.fakes.upstream import serving
from tests.figures import record
from tests.integration.test_worker_in_process import _run_until

# fault path -> the code the job must end with (None: it succeeds)
CASES = {
    "pass/ok": None,
    "status/400/ok": "CONTEXT_TOO_LONG",  # the proxy's 400 says "maximum context length exceeded"
    "status/401/ok": "AUTH_DENIED",
    "status/403/ok": "AUTH_DENIED",
    "status/404/ok": "NOT_FOUND",
    "status/410/ok": "NOT_FOUND",
    "status/422/ok": "VALIDATION_FAILED",
    "status/408/ok": "NETWORK_TIMEOUT",
    "status/409/ok": "CONFLICT",
    "status/429/ok": "RATE_LIMITED",
    "status/500/ok": "UPSTREAM_5XX",
    "status/502/ok": "UPSTREAM_5XX",
    "status/503/ok": "UPSTREAM_5XX",
    "status/504/ok": "UPSTREAM_5XX",
    "reset/ok": "NETWORK_ERROR",
    "truncated/ok": "NETWORK_ERROR",
    "slow-body/ok": "NETWORK_TIMEOUT",
    "garbage/ok": "RESPONSE_INVALID",
}


@pytest.fixture
def proxy_url():
    with serving() as upstream, fault_proxy(upstream.url) as proxy:
        yield proxy


def test_every_failure_ends_with_its_code_retried_only_when_retryable(tmp_path, proxy_url) -> None:
    proxy = proxy_url
    app = App(f"sqlite:///{tmp_path / 'redrive.db'}")

    @app.task(max_attempts=2, backoff=Fixed([timedelta(milliseconds=50)]))
    def fetch(path: str) -> dict:
        answer = httpx.get(f"{proxy.url}/{path}", timeout=httpx.Timeout(5, read=0.5))
        answer.raise_for_status()
        return answer.json()

    jobs = {path: fetch.enqueue(path).job for path in CASES}
    asyncio.run(_run_until(app, lambda: all(app.client.job(j.id).status in (Status.SUCCEEDED, Status.FAILED)
                                            for j in jobs.values()), concurrency=len(CASES)))
    wrong = {}
    for path, expected in CASES.items():
        job = app.client.job(jobs[path].id)
        retried = expected is not None and DEFAULT_TAXONOMY.require(expected).retryable
        got = (job.error_code, job.attempts)
        if got != (expected, 2 if retried else 1):
            wrong[path] = got
    record("dependency failures through a fault proxy", "cases ending with the wrong code or attempts",
           f"{len(wrong)} of {len(CASES)}", "0")
    assert not wrong, wrong
    # A 429's Retry-After: 1 was waited out, not the task's 50 ms backoff
    (retry,) = [e for e in app.client.job_events(jobs["status/429/ok"].id) if e.to_status == "queued" and e.from_status]
    assert retry.meta["delay_ms"] >= 1000
    app.close()
