"""Backoff policies as small values: ``delay(attempt, rng=...)`` answers how
long to wait after the ``attempt``-th dispatch failed (attempt counts from 1).

Each reference system's formula is one of these, with its own numbers:

- criticizer: ``FullJitter(1 s, ×2, cap 60 s)``
- matching: ``Fixed([5 min, 30 min])``; matchmaking: ``Fixed([30 s, 2 min, 5 min])``
- converter (worker): ``AdditiveJitter(5 s, ×2, jitter 5 s)`` (5000 ms · 2^n + rand(0..5000 ms), n from 0)
- converter (failure handling): ``ProportionalJitter(5 s, ×3, ±20 %)`` (5 s, 15 s, 45 s ± 20 %)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from random import Random
from typing import Protocol

from redrive.errors import ConfigError

DEFAULT_RETRY_AFTER_CEILING = timedelta(minutes=5)
# Uncapped growth still stops here, long before timedelta would overflow.
MAX_DELAY = timedelta(days=365)


class Backoff(Protocol):
    def delay(self, attempt: int, *, rng: Random) -> timedelta: ...


def _grown(initial: timedelta, multiplier: float, attempt: int, cap: timedelta | None) -> float:
    """initial × multiplier^(attempt-1) in seconds, capped, without overflowing."""
    limit = (cap or MAX_DELAY).total_seconds()
    try:
        value = initial.total_seconds() * multiplier ** max(attempt - 1, 0)
    except OverflowError:
        return limit
    return min(limit, value)


def _check_growth(initial: timedelta, multiplier: float, cap: timedelta | None) -> None:
    if initial <= timedelta(0):
        raise ConfigError("backoff initial delay must be positive")
    if multiplier < 1:
        raise ConfigError("backoff multiplier must be at least 1")
    if cap is not None and cap < initial:
        raise ConfigError("backoff cap must be at least the initial delay")


@dataclass(frozen=True, slots=True)
class FullJitter:
    """``random(0, min(cap, initial × multiplier^(attempt-1)))``."""

    initial: timedelta = timedelta(seconds=1)
    multiplier: float = 2.0
    cap: timedelta = timedelta(seconds=60)

    def __post_init__(self) -> None:
        _check_growth(self.initial, self.multiplier, self.cap)

    def delay(self, attempt: int, *, rng: Random) -> timedelta:
        return timedelta(seconds=rng.uniform(0, _grown(self.initial, self.multiplier, attempt, self.cap)))


@dataclass(frozen=True, slots=True)
class Fixed:
    """The n-th delay of a schedule; past its end, the last one again."""

    schedule: Sequence[timedelta]

    def __post_init__(self) -> None:
        object.__setattr__(self, "schedule", tuple(self.schedule))
        if not self.schedule or any(d < timedelta(0) for d in self.schedule):
            raise ConfigError("a fixed backoff needs one or more non-negative delays")

    def delay(self, attempt: int, *, rng: Random) -> timedelta:
        return self.schedule[min(max(attempt, 1), len(self.schedule)) - 1]


@dataclass(frozen=True, slots=True)
class AdditiveJitter:
    """``initial × multiplier^(attempt-1) + random(0, jitter)``, the growth capped."""

    initial: timedelta = timedelta(seconds=5)
    multiplier: float = 2.0
    jitter: timedelta = timedelta(seconds=5)
    cap: timedelta | None = None

    def __post_init__(self) -> None:
        _check_growth(self.initial, self.multiplier, self.cap)
        if self.jitter < timedelta(0):
            raise ConfigError("backoff jitter cannot be negative")

    def delay(self, attempt: int, *, rng: Random) -> timedelta:
        base = _grown(self.initial, self.multiplier, attempt, self.cap)
        return timedelta(seconds=base + rng.uniform(0, self.jitter.total_seconds()))


@dataclass(frozen=True, slots=True)
class ProportionalJitter:
    """``initial × multiplier^(attempt-1)``, scaled by a random factor in 1 ± spread."""

    initial: timedelta = timedelta(seconds=5)
    multiplier: float = 3.0
    spread: float = 0.2
    cap: timedelta | None = None

    def __post_init__(self) -> None:
        _check_growth(self.initial, self.multiplier, self.cap)
        if not 0 <= self.spread < 1:
            raise ConfigError("backoff spread must be at least 0 and below 1 (0.2 is ±20 %)")

    def delay(self, attempt: int, *, rng: Random) -> timedelta:
        base = _grown(self.initial, self.multiplier, attempt, self.cap)
        return timedelta(seconds=base * rng.uniform(1 - self.spread, 1 + self.spread))


def effective_delay(
    policy: Backoff,
    attempt: int,
    *,
    rng: Random,
    retry_after: timedelta | None = None,
    ceiling: timedelta = DEFAULT_RETRY_AFTER_CEILING,
) -> timedelta:
    """The computed delay, unless the upstream's Retry-After asks for longer:
    then Retry-After, but never more than ``ceiling`` (or the computed delay,
    if that is longer still)."""
    computed = policy.delay(attempt, rng=rng)
    if retry_after is None or retry_after <= computed:
        return computed
    return max(computed, min(retry_after, ceiling))
