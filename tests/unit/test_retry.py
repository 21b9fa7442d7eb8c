"""The retry decision: the stage's budget, the job's cap, the stage's backoff."""

from __future__ import annotations

from datetime import timedelta
from random import Random

import pytest

from redrive.core.backoff import Fixed, FullJitter
from redrive.core.classify import Failure
from redrive.core.outcome import Failed, Retry
from redrive.core.retry import after_failure
from redrive.core.stages import Stage, next_after, pipeline, resume_at
from redrive.errors import ConfigError

RETRYABLE = Failure(code="UPSTREAM_5XX", retryable=True, message="503")
LLM = Stage("llm", max_attempts=3, backoff=Fixed([timedelta(seconds=30), timedelta(minutes=2)]))


def decide(failure: Failure = RETRYABLE, *, stage_attempts: int, attempts: int = 1,
           max_attempts: int = 15, stage: Stage = LLM):
    return after_failure(failure, stage=stage, stage_attempts=stage_attempts, attempts=attempts,
                         max_attempts=max_attempts, rng=Random(1))


def test_a_retryable_failure_retries_until_its_stage_budget_is_spent() -> None:
    assert decide(stage_attempts=1) == Retry(timedelta(seconds=30), RETRYABLE)
    # the delay follows the stage's own count, not the job's dispatches
    assert decide(stage_attempts=2, attempts=9) == Retry(timedelta(minutes=2), RETRYABLE)
    assert decide(stage_attempts=3) == Failed(RETRYABLE)


def test_the_jobs_max_attempts_caps_every_stage() -> None:
    assert decide(stage_attempts=1, attempts=15, max_attempts=15) == Failed(RETRYABLE)


def test_a_non_retryable_failure_fails_at_once() -> None:
    denied = Failure(code="AUTH_DENIED", retryable=False, message="401")
    assert decide(denied, stage_attempts=1) == Failed(denied)


def test_a_larger_retry_after_wins() -> None:
    failure = Failure(code="RATE_LIMITED", retryable=True, message="429", retry_after=timedelta(seconds=50))
    outcome = decide(failure, stage_attempts=1, stage=Stage("s", backoff=FullJitter()))
    assert outcome == Retry(timedelta(seconds=50), failure)


def test_pipelines_are_validated_and_resume_at_the_first_unfinished_stage() -> None:
    stages = pipeline(["fetch", Stage("llm", max_attempts=2), "notify"])
    assert [s.max_attempts for s in stages] == [5, 2, 5]
    assert resume_at(stages, {}).name == "fetch"
    assert resume_at(stages, {"fetch": 1}).name == "llm"
    assert resume_at(stages, {"fetch": 1, "llm": 2, "notify": None}).name == "notify"
    assert next_after(stages, "llm") == "notify" and next_after(stages, "notify") is None
    for bad in ([], ["a", "a"], [""], ["x" * 101]):
        with pytest.raises(ConfigError):
            pipeline(bad)
    with pytest.raises(ConfigError, match="at least 1"):
        Stage("s", max_attempts=0)
