"""Limits shared by every worker through the store: how many jobs of a queue
may run at once, and how many may start in any period, per queue, per
dependency or per owner.

A claim that a limit may touch reads each key's usage (permits: one per
started job and key, held while the job runs) and takes only the due jobs
that fit (``pick``); the store records their permits as it claims them,
under the limits' lock. A store whose claims may race picks again there, on
each key's room (``rooms_of``) less the starts made since its read. The
rules are the application's declarations, so every worker of one deploy
enforces the same ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import NamedTuple

from redrive.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` starts in any window of ``per``."""

    count: int
    per: timedelta

    def __post_init__(self) -> None:
        if not isinstance(self.count, int) or isinstance(self.count, bool) or self.count < 1:
            raise ConfigError(f"a rate's count must be a whole number of at least 1, not {self.count!r}")
        if not isinstance(self.per, timedelta) or self.per <= timedelta(0):
            raise ConfigError(f"a rate's period must be a timedelta longer than zero, not {self.per!r}")


@dataclass(frozen=True, slots=True)
class Rule:
    """What one key allows: at most ``concurrency`` running, at most ``rate`` starting."""

    concurrency: int | None = None
    rate: Rate | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    """The rules a claim must keep, by key: ``queue:NAME``,
    ``dependency:NAME``; and per owner, ``owner:QUEUE`` (each owner of that
    queue gets the rule on its own, under ``owner:QUEUE:OWNER``)."""

    rules: Mapping[str, Rule] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def for_queues(self, queues: Iterable[str]) -> Limits:
        """The rules a claim from ``queues`` may meet (dependency rules meet every queue)."""
        wanted = set(queues)
        return Limits({key: rule for key, rule in self.rules.items()
                       if key.startswith("dependency:") or key.split(":")[1] in wanted})

    @property
    def longest(self) -> timedelta:
        """How long a permit must be kept for the rates to be read."""
        return max((r.rate.per for r in self.rules.values() if r.rate), default=timedelta(0))


def scan_size(want: int) -> int:
    """How many due jobs a claim with limits looks through for ``want`` that
    fit: enough that one owner's backlog at its limit hides nobody else's."""
    return 200 + want * 4


class Candidate(NamedTuple):
    id: str
    queue: str
    owner: str | None
    dependencies: Sequence[str]


class Usage(NamedTuple):
    running: int  # permits of jobs still running under the same lease
    started: int  # permits taken within the rule's rate window


def keys_of(job: Candidate, limits: Limits) -> list[tuple[str, Rule]]:
    """The keys a job's start counts against."""
    found = []
    if rule := limits.rules.get(f"queue:{job.queue}"):
        found.append((f"queue:{job.queue}", rule))
    if job.owner is not None and (rule := limits.rules.get(f"owner:{job.queue}")):
        found.append((f"owner:{job.queue}:{job.owner}", rule))
    for name in job.dependencies:
        if rule := limits.rules.get(f"dependency:{name}"):
            found.append((f"dependency:{name}", rule))
    return found


def rooms_of(usage: Mapping[str, Usage], keys: Iterable[str], limits: Limits) -> dict[str, int]:
    """How many more starts each of ``keys`` could take by ``usage``: the
    fewest its rule's concurrency and rate leave. A key whose rule limits
    nothing is left out: it has room for any number."""
    rooms = {}
    for key in keys:
        rule = rule_of(key, limits)
        used = usage.get(key, Usage(0, 0))
        left = ([rule.concurrency - used.running] if rule and rule.concurrency is not None else []) + (
            [rule.rate.count - used.started] if rule and rule.rate is not None else [])
        if left:
            rooms[key] = min(left)
    return rooms


def pick(candidates: Sequence[Candidate], usage: Mapping[str, Usage], limits: Limits, want: int) -> list[Candidate]:
    """The candidates, in order, that fit every limit they count against, at
    most ``want``: a job fits when each of its keys has room left, and then
    takes one of each (the rule PostgreSQL's redrive_limits_pick mirrors)."""
    keys = {job.id: [key for key, _ in keys_of(job, limits)] for job in candidates}
    room = rooms_of(usage, {key for ks in keys.values() for key in ks}, limits)
    chosen: list[Candidate] = []
    for job in candidates:
        if len(chosen) == want:
            break
        if all(room.get(key, 1) > 0 for key in keys[job.id]):
            chosen.append(job)
            for key in keys[job.id]:
                if key in room:
                    room[key] -= 1
    return chosen


class Permit(NamedTuple):
    key: str
    age_s: float  # since the start it records, on the store's clock
    running: bool  # its job still runs under the lease it started with


def usage_of(permits: Iterable[Permit], limits: Limits) -> dict[str, Usage]:
    """Each key's usage, its rate counted over its own rule's window."""
    running: dict[str, int] = {}
    started: dict[str, int] = {}
    for permit in permits:
        rule = rule_of(permit.key, limits)
        running[permit.key] = running.get(permit.key, 0) + permit.running
        if rule is not None and rule.rate is not None and permit.age_s < rule.rate.per.total_seconds():
            started[permit.key] = started.get(permit.key, 0) + 1
    return {key: Usage(running.get(key, 0), started.get(key, 0)) for key in running.keys() | started.keys()}


def rule_of(key: str, limits: Limits) -> Rule | None:
    kind, _, rest = key.partition(":")
    if kind == "owner":  # owner:QUEUE:OWNER is ruled by owner:QUEUE
        return limits.rules.get(f"owner:{rest.split(':', 1)[0]}")
    return limits.rules.get(key)
