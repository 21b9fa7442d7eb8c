"""Alert rules evaluated inside redrive, for users without Prometheus: each
rule looks at a ``Reading`` (the queues as the store has them, and the jobs
that ended lately) and says whether it fires, and why. ``Incidents`` turns
those answers into transitions: a rule fires once when it starts failing
and resolves once when it clears.

Pure: the evaluator (``redrive.alerts``) takes the reading and the time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from redrive.errors import ConfigError


@dataclass(frozen=True, slots=True)
class QueueReading:
    queue: str
    queued: int  # due or not, waiting for a worker
    oldest_due_age_s: float | None


@dataclass(frozen=True, slots=True)
class Ended:
    """A job run that ended: when (epoch seconds), how long it ran, and whether it failed for good."""

    at: float
    task: str
    duration_s: float | None  # None: no run timed it (the reclaim failed it)
    failed: bool


@dataclass(frozen=True, slots=True)
class Reading:
    now: float  # epoch seconds
    queues: Sequence[QueueReading] = ()
    ended: Sequence[Ended] = ()  # runs that ended lately, oldest first


class Rule(Protocol):
    @property
    def name(self) -> str:  # read-only, so the frozen rules above are Rules to a type checker
        """Letters, digits, - and _: the rule's name in logs and notifications."""

    def check(self, reading: Reading) -> tuple[bool, str]:
        """Whether the rule fires now, and a line saying what it sees."""


def _positive(name: str, value: float, what: str) -> None:
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ConfigError(f"an alert rule's name is letters, digits, - and _, not {name!r}")
    if value < 0:
        raise ConfigError(f"alert rule {name}: {what} cannot be negative")


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """Fires while a queue (or any queue) holds more than ``above`` queued jobs."""

    name: str
    above: int
    queue: str | None = None

    def __post_init__(self) -> None:
        _positive(self.name, self.above, "the threshold")

    def check(self, reading: Reading) -> tuple[bool, str]:
        watched = [q for q in reading.queues if self.queue in (None, q.queue)]
        deepest = max(watched, key=lambda q: q.queued, default=None)
        if deepest is None:
            return False, f"no queued jobs (threshold {self.above})"
        return deepest.queued > self.above, f"queue {deepest.queue} holds {deepest.queued} queued jobs " \
                                             f"(threshold {self.above})"


@dataclass(frozen=True, slots=True)
class OldestQueuedAge:
    """Fires while a due job has waited longer than ``above``."""

    name: str
    above: timedelta
    queue: str | None = None

    def __post_init__(self) -> None:
        _positive(self.name, self.above.total_seconds(), "the threshold")

    def check(self, reading: Reading) -> tuple[bool, str]:
        ages = [(q.oldest_due_age_s, q.queue) for q in reading.queues
                if self.queue in (None, q.queue) and q.oldest_due_age_s is not None]
        if not ages:
            return False, "no due job waits"
        age, queue = max(ages)
        limit = self.above.total_seconds()
        return age > limit, f"the oldest due job of queue {queue} has waited {age:.0f} s (threshold {limit:.0f} s)"


def _recent(rule_window: timedelta, reading: Reading, task: str | None) -> list[Ended]:
    since = reading.now - rule_window.total_seconds()
    return [e for e in reading.ended if e.at >= since and task in (None, e.task)]


@dataclass(frozen=True, slots=True)
class FailureRate:
    """Fires while more than ``above`` (0.01 = 1 %) of the runs that ended in
    ``window`` failed for good, once at least ``min_jobs`` ended."""

    name: str
    above: float
    window: timedelta = timedelta(minutes=10)
    task: str | None = None
    min_jobs: int = 20

    def __post_init__(self) -> None:
        _positive(self.name, self.above, "the threshold")
        if self.above >= 1:
            raise ConfigError(f"alert rule {self.name}: a failure rate is a fraction below 1 (0.01 is 1 %)")

    def check(self, reading: Reading) -> tuple[bool, str]:
        recent = _recent(self.window, reading, self.task)
        failed = sum(e.failed for e in recent)
        rate = failed / len(recent) if recent else 0.0
        return len(recent) >= self.min_jobs and rate > self.above, \
            f"{failed} of {len(recent)} jobs failed for good in {self.window} ({rate:.1%}, threshold {self.above:.1%})"


@dataclass(frozen=True, slots=True)
class DurationPercentile:
    """Fires while the ``percentile`` (0.95) of run durations in ``window`` is over ``above``."""

    name: str
    above: timedelta
    percentile: float = 0.95
    window: timedelta = timedelta(minutes=15)
    task: str | None = None
    min_jobs: int = 20

    def __post_init__(self) -> None:
        _positive(self.name, self.above.total_seconds(), "the threshold")
        if not 0 < self.percentile < 1:
            raise ConfigError(f"alert rule {self.name}: a percentile is between 0 and 1, such as 0.95")

    def check(self, reading: Reading) -> tuple[bool, str]:
        durations = sorted(e.duration_s for e in _recent(self.window, reading, self.task) if e.duration_s is not None)
        if len(durations) < self.min_jobs:
            return False, f"{len(durations)} runs in {self.window}, too few to judge"
        value = durations[min(len(durations) - 1, int(len(durations) * self.percentile))]
        limit = self.above.total_seconds()
        return value > limit, f"p{self.percentile * 100:g} of run durations is {value:.1f} s (threshold {limit:.0f} s)"


@dataclass(frozen=True, slots=True)
class Check:
    """A check of the application's own: ``test()`` returns whether it fires
    (the matchmaking example's "duplicate offers created > 0"), or that and a line saying why."""

    name: str
    test: Callable[[], bool | tuple[bool, str]]

    def __post_init__(self) -> None:
        _positive(self.name, 0, "")

    def check(self, reading: Reading) -> tuple[bool, str]:
        found = self.test()
        return found if isinstance(found, tuple) else (bool(found), f"{self.name} is failing")


@dataclass(frozen=True, slots=True)
class Transition:
    rule: str
    state: str  # "firing" or "resolved"
    detail: str
    incident: str  # when it started firing: the same for its firing and its resolve


@dataclass
class Incidents:
    """What is firing now; ``update`` returns a transition only when a rule starts or stops firing."""

    firing: dict[str, str] = field(default_factory=dict)  # rule -> incident

    def update(self, rule: str, fires: bool, detail: str, now: float) -> Transition | None:
        incident = self.firing.get(rule)
        if fires and incident is None:
            self.firing[rule] = incident = f"{now:.0f}"
            return Transition(rule, "firing", detail, incident)
        if not fires and incident is not None:
            del self.firing[rule]
            return Transition(rule, "resolved", detail, incident)
        return None
