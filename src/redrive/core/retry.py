"""The retry decision: given how an attempt failed, retry now, later, or never."""

from __future__ import annotations

from datetime import timedelta
from random import Random

from redrive.core.backoff import FullJitter
from redrive.core.outcome import Failed, Retry


def after_failure(
    *,
    code: str,
    message: str,
    retryable: bool,
    attempts: int,
    max_attempts: int,
    backoff: FullJitter,
    rng: Random,
    retry_after: timedelta | None = None,
) -> Retry | Failed:
    """``attempts`` counts dispatches so far, the failed one included."""
    if not retryable or attempts >= max_attempts:
        return Failed(error_code=code, error_message=message)
    delay = backoff.delay(attempts, rng=rng)
    if retry_after is not None and retry_after > delay:
        delay = retry_after
    return Retry(delay=delay, error_code=code, error_message=message)
