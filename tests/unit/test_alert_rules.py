"""Alert rules judge a reading; incidents fire once and resolve once."""

from __future__ import annotations

from datetime import timedelta

import pytest

from redrive.core.alerts import (
    Check,
    DurationPercentile,
    Ended,
    FailureRate,
    Incidents,
    OldestQueuedAge,
    QueueDepth,
    QueueReading,
    Reading,
)
from redrive.errors import ConfigError

NOW = 1_800_000_000.0


def _ended(failed: int, ok: int, *, ago: float = 10, duration: float = 1.0, task: str = "t") -> list[Ended]:
    return [Ended(NOW - ago, task, duration, n < failed) for n in range(failed + ok)]


def test_queue_depth_and_age_look_at_the_watched_queue() -> None:
    reading = Reading(NOW, [QueueReading("bulk", 1001, 30.0), QueueReading("email", 5, 900.0)])
    assert QueueDepth("deep", above=1000).check(reading)[0] is True
    assert QueueDepth("deep", above=1000, queue="email").check(reading)[0] is False
    fires, detail = OldestQueuedAge("old", above=timedelta(minutes=10)).check(reading)
    assert fires and "email" in detail and "900 s" in detail
    assert OldestQueuedAge("old", above=timedelta(minutes=10), queue="bulk").check(reading)[0] is False


def test_failure_rate_counts_the_window_and_waits_for_enough_jobs() -> None:
    rule = FailureRate("failing", above=0.01, window=timedelta(minutes=10), min_jobs=20)
    assert rule.check(Reading(NOW, ended=_ended(2, 98)))[0] is True  # 2 %
    assert rule.check(Reading(NOW, ended=_ended(1, 99)))[0] is False  # 1 % is not over 1 %
    assert rule.check(Reading(NOW, ended=_ended(5, 5)))[0] is False  # 10 jobs: too few to judge
    assert rule.check(Reading(NOW, ended=_ended(50, 50, ago=3600)))[0] is False  # outside the window
    assert FailureRate("f", above=0.5, task="other").check(Reading(NOW, ended=_ended(30, 0)))[0] is False


def test_duration_percentile() -> None:
    rule = DurationPercentile("slow", above=timedelta(minutes=5), min_jobs=20)
    quick = _ended(0, 95, duration=1.0)
    assert rule.check(Reading(NOW, ended=quick + _ended(0, 4, duration=600)))[0] is False  # p95 still quick
    fires, detail = rule.check(Reading(NOW, ended=quick + _ended(0, 10, duration=600)))
    assert fires and "p95" in detail and "600.0 s" in detail


def test_a_check_of_the_apps_own() -> None:
    duplicates = [0]
    rule = Check("duplicate_offers", lambda: (duplicates[0] > 0, f"{duplicates[0]} duplicate offers"))
    assert rule.check(Reading(NOW)) == (False, "0 duplicate offers")
    duplicates[0] = 2
    assert rule.check(Reading(NOW)) == (True, "2 duplicate offers")
    assert Check("plain", lambda: True).check(Reading(NOW)) == (True, "plain is failing")


def test_an_incident_fires_once_and_resolves_once() -> None:
    incidents = Incidents()
    answers = [False, True, True, True, False, False, True]
    told = [incidents.update("r", fires, "d", NOW + n) for n, fires in enumerate(answers)]
    states = [(t.state, t.incident) for t in told if t is not None]
    assert states == [("firing", f"{NOW + 1:.0f}"), ("resolved", f"{NOW + 1:.0f}"), ("firing", f"{NOW + 6:.0f}")]


def test_rules_refuse_nonsense() -> None:
    for bad in (lambda: FailureRate("f", above=5), lambda: QueueDepth("a b", above=1),
                lambda: DurationPercentile("p", above=timedelta(0), percentile=95),
                lambda: QueueDepth("q", above=-1)):
        with pytest.raises(ConfigError):
            bad()
