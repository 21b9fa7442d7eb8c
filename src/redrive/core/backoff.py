"""Backoff policies as small values: ``delay(attempt, rng=...)`` answers how long to wait."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from random import Random

from redrive.errors import ConfigError


@dataclass(frozen=True, slots=True)
class FullJitter:
    """``random(0, min(cap, initial * multiplier^(attempt-1)))``, attempt counted from 1."""

    initial: timedelta = timedelta(seconds=1)
    multiplier: float = 2.0
    cap: timedelta = timedelta(seconds=60)

    def __post_init__(self) -> None:
        if self.initial <= timedelta(0) or self.cap < self.initial:
            raise ConfigError("backoff needs 0 < initial <= cap")
        if self.multiplier < 1:
            raise ConfigError("backoff multiplier must be at least 1")

    def delay(self, attempt: int, *, rng: Random) -> timedelta:
        return timedelta(seconds=rng.uniform(0, self._ceiling_s(attempt)))

    def _ceiling_s(self, attempt: int) -> float:
        try:
            grown = self.initial.total_seconds() * self.multiplier ** max(attempt - 1, 0)
        except OverflowError:  # long past the cap
            return self.cap.total_seconds()
        return min(self.cap.total_seconds(), grown)
