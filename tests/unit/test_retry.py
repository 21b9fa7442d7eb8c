from __future__ import annotations

from datetime import timedelta
from random import Random

from redrive.core.backoff import FullJitter
from redrive.core.classify import Failure
from redrive.core.outcome import Failed, Retry
from redrive.core.retry import after_failure

RETRYABLE = Failure("UPSTREAM_5XX", True, "503")


def test_a_retryable_failure_retries_until_the_last_attempt() -> None:
    common = dict(max_attempts=3, backoff=FullJitter(), rng=Random(1))
    assert isinstance(after_failure(RETRYABLE, attempts=2, **common), Retry)
    assert after_failure(RETRYABLE, attempts=3, **common) == Failed("UPSTREAM_5XX", "503")
    assert after_failure(Failure("AUTH_DENIED", False, "401"), attempts=1, **common) == Failed(
        "AUTH_DENIED", "401")


def test_a_larger_retry_after_wins() -> None:
    failure = Failure("RATE_LIMITED", True, "429", retry_after=timedelta(seconds=30))
    outcome = after_failure(failure, attempts=1, max_attempts=3, backoff=FullJitter(), rng=Random(1))
    assert outcome == Retry(timedelta(seconds=30), "RATE_LIMITED", "429")
