"""The retry decision: given a classified failure, retry later or fail now."""

from __future__ import annotations

from datetime import timedelta
from random import Random

from redrive.core.backoff import DEFAULT_RETRY_AFTER_CEILING, Backoff, effective_delay
from redrive.core.classify import Failure
from redrive.core.outcome import Failed, Retry


def after_failure(
    failure: Failure,
    *,
    attempts: int,
    max_attempts: int,
    backoff: Backoff,
    rng: Random,
    retry_after_ceiling: timedelta = DEFAULT_RETRY_AFTER_CEILING,
) -> Retry | Failed:
    """``attempts`` counts dispatches so far, the failed one included."""
    if not failure.retryable or attempts >= max_attempts:
        return Failed(error_code=failure.code, error_message=failure.message)
    delay = effective_delay(backoff, attempts, rng=rng, retry_after=failure.retry_after,
                            ceiling=retry_after_ceiling)
    return Retry(delay=delay, error_code=failure.code, error_message=failure.message)
