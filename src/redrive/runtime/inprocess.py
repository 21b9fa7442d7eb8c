"""The first retry level: retry one call a few times inside the running job
(the matching system's LLM calls: 3 tries, 2 s / 4 s / 8 s), with the same classification as the
queue level. What is still failing after the last try is raised, and the job's
own retry policy takes it from there."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from random import Random
from typing import Any, TypeVar

from redrive.core.backoff import Backoff, Fixed, effective_delay
from redrive.core.classify import DEFAULT_CLASSIFIER, Classifier, Failure
from redrive.errors import ConfigError

T = TypeVar("T")


@dataclass(frozen=True)
class InProcessRetry:
    attempts: int = 3
    backoff: Backoff = Fixed([timedelta(seconds=2), timedelta(seconds=4), timedelta(seconds=8)])
    classifier: Classifier = DEFAULT_CLASSIFIER
    sleep: Callable[[float], None] = time.sleep
    async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: Random = field(default_factory=Random)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigError("in-process retry needs at least one attempt")

    def _next_delay(self, exc: Exception, attempt: int) -> float | None:
        """Seconds to wait before the next try, or None to give up and raise."""
        failure = self._classify(exc)
        if not failure.retryable or attempt >= self.attempts:
            return None
        return effective_delay(self.backoff, attempt, rng=self.rng,
                               retry_after=failure.retry_after).total_seconds()

    def _classify(self, exc: Exception) -> Failure:
        return self.classifier.exception(exc, now=datetime.now(UTC))

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        attempt = 1
        while True:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                delay = self._next_delay(exc, attempt)
                if delay is None:
                    raise
            self.sleep(delay)
            attempt += 1

    async def acall(self, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        attempt = 1
        while True:
            try:
                return await fn(*args, **kwargs)
            except Exception as exc:
                delay = self._next_delay(exc, attempt)
                if delay is None:
                    raise
            await self.async_sleep(delay)
            attempt += 1
