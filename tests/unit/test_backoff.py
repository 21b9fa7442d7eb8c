"""Property tests of every backoff policy: always inside its bounds, Retry-After
obeyed and capped, garbage or past Retry-After ignored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from random import Random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redrive.core.backoff import MAX_DELAY, AdditiveJitter, Fixed, FullJitter, ProportionalJitter, effective_delay
from redrive.core.classify import parse_retry_after
from redrive.errors import ConfigError

attempts = st.integers(1, 2000)
seeds = st.integers()
S = timedelta(seconds=1)


@given(attempt=attempts, seed=seeds)
def test_full_jitter_seed_001(attempt: int, seed: int) -> None:
    delay = FullJitter(1 * S, 2.0, 60 * S).delay(attempt, rng=Random(seed)).total_seconds()
    assert 0 <= delay <= min(60.0, 2.0 ** min(attempt - 1, 64))


@given(attempt=attempts, seed=seeds)
def test_fixed_schedules_of_seeds_000_and_004(attempt: int, seed: int) -> None:
    seed_000 = Fixed([timedelta(minutes=5), timedelta(minutes=30)])
    seed_004 = Fixed([30 * S, timedelta(minutes=2), timedelta(minutes=5)])
    assert seed_000.delay(attempt, rng=Random(seed)) == [timedelta(minutes=5), timedelta(minutes=30)][min(attempt, 2) - 1]
    assert seed_004.delay(attempt, rng=Random(seed)) == seed_004.schedule[min(attempt, 3) - 1]


@given(attempt=attempts, seed=seeds)
def test_additive_jitter_seed_003(attempt: int, seed: int) -> None:
    # 5000 ms · 2^n + rand(0..5000 ms), n = attempt - 1
    delay = AdditiveJitter(5 * S, 2.0, 5 * S).delay(attempt, rng=Random(seed)).total_seconds()
    base = min(5 * 2 ** min(attempt - 1, 64), MAX_DELAY.total_seconds())
    assert base <= delay <= base + 5


@given(attempt=attempts, seed=seeds)
def test_proportional_jitter_seed_002(attempt: int, seed: int) -> None:
    # 5 s, 15 s, 45 s, ... each ± 20 %
    delay = ProportionalJitter(5 * S, 3.0, 0.2).delay(attempt, rng=Random(seed)).total_seconds()
    base = min(5 * 3 ** min(attempt - 1, 64), MAX_DELAY.total_seconds())
    assert base * 0.8 - 1e-6 <= delay <= base * 1.2 + 1e-6


def test_every_delay_is_recomputed_per_attempt() -> None:
    policy, rng = FullJitter(), Random(7)
    assert len({policy.delay(6, rng=rng) for _ in range(20)}) > 1


@given(attempt=st.integers(1, 20), seed=seeds, retry_after_s=st.integers(0, 10_000))
def test_retry_after_wins_when_larger_and_is_capped(attempt: int, seed: int, retry_after_s: int) -> None:
    policy = FullJitter()
    computed = policy.delay(attempt, rng=Random(seed))
    retry_after = timedelta(seconds=retry_after_s)
    delay = effective_delay(policy, attempt, rng=Random(seed), retry_after=retry_after)
    ceiling = timedelta(minutes=5)
    assert delay == (computed if retry_after <= computed else max(computed, min(retry_after, ceiling)))
    assert delay <= max(ceiling, computed)
    assert delay >= min(retry_after, ceiling)


def test_a_long_fixed_schedule_is_not_cut_by_the_retry_after_ceiling() -> None:
    policy = Fixed([timedelta(minutes=30)])
    assert effective_delay(policy, 1, rng=Random(1), retry_after=timedelta(hours=2)) == timedelta(minutes=30)


NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("120", timedelta(seconds=120)),
        ("  7 ", timedelta(seconds=7)),
        ("Sun, 22 Nov 2026 12:01:30 GMT", timedelta(seconds=90)),
        ("Sun, 22 Nov 2026 11:59:00 GMT", None),  # in the past
        ("-5", None),
        ("soon", None),
        ("", None),
        ("1.5", None),
        ("²", None),  # a digit to str.isdigit, not to int()
        ("9" * 30, None),  # more seconds than a timedelta holds
        (None, None),
    ],
)
def test_retry_after_in_both_forms(header, expected) -> None:
    assert parse_retry_after(header, now=NOW) == expected


@given(garbage=st.text(max_size=40))
def test_garbage_retry_after_falls_back_to_the_computed_delay(garbage: str) -> None:
    parsed = parse_retry_after(garbage, now=NOW)
    policy = Fixed([10 * S])
    delay = effective_delay(policy, 1, rng=Random(1), retry_after=parsed)
    assert delay == 10 * S or (parsed is not None and delay == min(parsed, timedelta(minutes=5)))


@pytest.mark.parametrize(
    "make",
    [
        lambda: FullJitter(initial=timedelta(0)),
        lambda: FullJitter(multiplier=0.5),
        lambda: FullJitter(initial=10 * S, cap=1 * S),
        lambda: Fixed([]),
        lambda: Fixed([-S]),
        lambda: AdditiveJitter(jitter=-S),
        lambda: ProportionalJitter(spread=1.5),
    ],
)
def test_a_nonsensical_policy_is_refused_at_construction(make) -> None:
    with pytest.raises(ConfigError):
        make()
