from datetime import timedelta
from random import Random

from hypothesis import given, strategies as st

from redrive.core.backoff import FullJitter
from redrive.core.outcome import Failed, Retry
from redrive.core.retry import after_failure


@given(attempt=st.integers(1, 5000), seed=st.integers())
def test_full_jitter_stays_within_its_ceiling(attempt: int, seed: int) -> None:
    policy = FullJitter()
    delay = policy.delay(attempt, rng=Random(seed)).total_seconds()
    assert 0 <= delay <= min(60.0, 2.0 ** min(attempt - 1, 64))


def test_a_retryable_failure_retries_until_the_last_attempt() -> None:
    common = dict(code="E", message="m", retryable=True, max_attempts=3,
                  backoff=FullJitter(), rng=Random(1))
    assert isinstance(after_failure(attempts=2, **common), Retry)
    assert after_failure(attempts=3, **common) == Failed("E", "m")
    assert after_failure(**{**common, "retryable": False}, attempts=1) == Failed("E", "m")


def test_a_larger_retry_after_wins() -> None:
    outcome = after_failure(code="E", message="m", retryable=True, attempts=1, max_attempts=3,
                            backoff=FullJitter(), rng=Random(1), retry_after=timedelta(seconds=30))
    assert outcome == Retry(timedelta(seconds=30), "E", "m")
