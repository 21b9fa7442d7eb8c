"""The in-process retry level against a real local HTTP server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest

from redrive import Fixed, InProcessRetry
from tests.fakes.upstream import Upstream, serving


@pytest.fixture
def server() -> Iterator[tuple[str, Upstream]]:
    with serving() as upstream:
        yield f"{upstream.url}/", upstream


def _get(url: str) -> dict:
    response = httpx.get(url, timeout=5)
    response.raise_for_status()
    return response.json()


def test_two_503s_then_success_with_seed_000_spacing(server) -> None:
    url, flaky = server
    flaky.script("/", (503, {}), (503, {}))
    slept: list[float] = []
    assert InProcessRetry(sleep=slept.append).call(_get, url) == {"ok": True}
    assert len(flaky.calls()) == 3 and slept == [2.0, 4.0]


def test_retry_after_from_the_server_is_honoured(server) -> None:
    url, flaky = server
    flaky.script("/", (429, {"Retry-After": "9"}))
    slept: list[float] = []
    InProcessRetry(sleep=slept.append).call(_get, url)
    assert slept == [9.0]


def test_a_non_retryable_answer_is_raised_at_once(server) -> None:
    url, flaky = server
    flaky.script("/", (401, {}))
    slept: list[float] = []
    with pytest.raises(httpx.HTTPStatusError):
        InProcessRetry(sleep=slept.append).call(_get, url)
    assert len(flaky.calls()) == 1 and slept == []


def test_the_last_failure_is_raised_for_the_queue_level(server) -> None:
    url, flaky = server
    flaky.script("/", *[502] * 5)
    slept: list[float] = []
    with pytest.raises(httpx.HTTPStatusError) as raised:
        InProcessRetry(sleep=slept.append).call(_get, url)
    assert raised.value.response.status_code == 502
    assert len(flaky.calls()) == 3 and slept == [2.0, 4.0]


def test_async_calls_retry_the_same_way(server) -> None:
    url, flaky = server
    flaky.script("/", (500, {}))
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def get() -> dict:
        async with httpx.AsyncClient(timeout=5) as client:
            response = await client.get(url)
            response.raise_for_status()
            return response.json()

    retry = InProcessRetry(async_sleep=sleep, backoff=Fixed([timedelta(seconds=1)]))
    assert asyncio.run(retry.acall(get)) == {"ok": True}
    assert slept == [1.0]
