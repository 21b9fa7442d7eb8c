"""The retry decision: given a classified failure, retry later or fail now."""

from __future__ import annotations

from datetime import timedelta
from random import Random

from redrive.core.backoff import DEFAULT_RETRY_AFTER_CEILING, effective_delay
from redrive.core.classify import Failure
from redrive.core.outcome import Failed, Retry
from redrive.core.stages import Stage


def after_failure(
    failure: Failure,
    *,
    stage: Stage,
    stage_attempts: int,
    attempts: int,
    max_attempts: int,
    rng: Random,
    retry_after_ceiling: timedelta = DEFAULT_RETRY_AFTER_CEILING,
) -> Retry | Failed:
    """``stage_attempts`` counts runs of the failed stage and ``attempts`` the
    job's dispatches, the failed one included in both. The stage's budget and
    the job's ``max_attempts`` both bind; the delay grows with the stage's count."""
    if not failure.retryable or stage_attempts >= stage.max_attempts or attempts >= max_attempts:
        return Failed(failure)
    delay = effective_delay(stage.backoff, stage_attempts, rng=rng, retry_after=failure.retry_after,
                            ceiling=retry_after_ceiling)
    return Retry(delay, failure)
