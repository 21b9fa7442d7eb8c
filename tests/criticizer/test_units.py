"""The rows of §8.1 that a stand-in service cannot produce (a name that
does not resolve, a code defect), and §8.2's backoff, against the
criticizer's own classifier and settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from random import Random

import httpx
import pytest
from criticizer.codes import CLASSIFIER
from criticizer.pipeline import make_app
from criticizer.settings import Settings

from redrive import ConfigError
from redrive.core.backoff import effective_delay

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def _raised(call) -> BaseException:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("nothing was raised")


def test_a_name_that_does_not_resolve_and_a_refused_connection_are_retried() -> None:
    for url in ("http://criticizer-source.invalid/changes/1", "http://127.0.0.1:9/changes/1"):
        failure = CLASSIFIER.exception(_raised(lambda u=url: httpx.get(u, timeout=2)), now=NOW)
        assert (failure.code, failure.retryable) == ("NETWORK_ERROR", True), url
    failure = CLASSIFIER.exception(httpx.ConnectTimeout("DNS lookup timed out"), now=NOW)
    assert (failure.code, failure.retryable) == ("NETWORK_TIMEOUT", True)


@pytest.mark.parametrize("defect", [
    AttributeError("'NoneType' object has no attribute 'diff'"),  # null dereference
    RuntimeError("illegal state: notify before llm"),
    AssertionError("invariant violated: verdict is empty"),
    KeyError("WEBHOOK_URL"),  # bad deploy config
])
def test_a_code_defect_is_a_bug_and_is_not_retried(defect: Exception) -> None:
    failure = CLASSIFIER.exception(defect, now=NOW)
    assert (failure.code, failure.retryable) == ("BUG", False)


def test_each_stage_has_five_attempts_and_full_jitter_one_second_doubling_capped_at_a_minute(tmp_path) -> None:
    app = make_app(Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}"))
    try:
        stages = app.registry.task("criticize").stages
        assert [(s.name, s.max_attempts) for s in stages] == [("fetch", 5), ("llm", 5), ("notify", 5)]
        rng = Random(7)
        for stage in stages:
            for attempt, ceiling in [(1, 1), (2, 2), (3, 4), (6, 32), (7, 60), (12, 60)]:
                delays = [stage.backoff.delay(attempt, rng=rng).total_seconds() for _ in range(300)]
                assert all(0 <= d <= ceiling for d in delays), (attempt, max(delays))
                assert max(delays) > ceiling * 0.8  # spread over the whole range: full jitter
        backoff = stages[1].backoff
        assert effective_delay(backoff, 1, rng=rng, retry_after=timedelta(seconds=30)) == timedelta(seconds=30)
        assert effective_delay(backoff, 1, rng=rng, retry_after=timedelta(hours=1)) == timedelta(minutes=5)
    finally:
        app.close()


def test_a_bad_knob_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError, match="ATTEMPTS_PER_STAGE must be a number"):
        Settings.from_env({"ATTEMPTS_PER_STAGE": "five"})
    with pytest.raises(ConfigError, match="BACKOFF_MAX_S must be above 0"):
        Settings.from_env({"BACKOFF_MAX_S": "0"})
