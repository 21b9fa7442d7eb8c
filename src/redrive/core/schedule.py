"""Schedules: cron expressions on the local wall clock of one or more time
zones, and the firings they make between two instants.

Cron is evaluated on naive local time, so "09:00" means 09:00 on the wall
clock every day. Each nominal local time becomes one instant: a time that
does not exist (spring forward) fires at the instant the gap ends; a time
that occurs twice (fall back) fires at its first occurrence. Each firing has
a key built from its nominal local time, so it is enqueued once however many
schedulers compute it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from redrive.errors import ConfigError

if TYPE_CHECKING:
    from croniter import croniter

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# At least the largest DST shift in the tz database (2 h, Antarctica/Troll).
_LARGEST_SHIFT = timedelta(hours=2)


@lru_cache(maxsize=1024)
def zone(name: str) -> ZoneInfo:
    if not isinstance(name, str) or not name:
        raise ConfigError("a time zone is an IANA name such as Europe/London")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"unknown time zone {name!r} (use an IANA name such as Europe/London)") from None


def cron(expression: str) -> str:
    # croniter (and dateutil, which it imports) is imported at first use: every
    # process imports redrive, and most (the CLI, workers without schedules)
    # never read a cron expression.
    from croniter import CroniterBadDateError, croniter

    if not isinstance(expression, str) or not croniter.is_valid(expression):
        raise ConfigError(f"malformed cron expression {expression!r} (such as '0 9 * * *')")
    try:  # a day that no month has (30 February) parses, but would fail every tick
        _times(expression, datetime(2000, 1, 1)).get_next(datetime)
    except CroniterBadDateError:
        raise ConfigError(f"cron expression {expression!r} never fires (no month has that day)") from None
    return expression


@dataclass(frozen=True, slots=True)
class Firing:
    schedule: str
    timezone: str
    local: datetime  # nominal local wall-clock time (naive)
    at: datetime  # the instant it fires (UTC)
    slot: str  # the local date, or date and time for schedules firing more than daily
    entity: str | None = None

    @property
    def local_date(self) -> date:
        return self.local.date()

    @property
    def key(self) -> str:
        """``{schedule}:{slot}:{tz}[:{entity}]``: the idempotency key of its job."""
        key = f"{self.schedule}:{self.slot}:{self.timezone}"
        return key if self.entity is None else f"{key}:{self.entity}"

    def for_entity(self, entity: str) -> Firing:
        return Firing(self.schedule, self.timezone, self.local, self.at, self.slot, str(entity))


@dataclass(frozen=True)
class Schedule:
    """Run ``task`` at each time of ``cron`` in each of ``timezones`` (a list,
    or a function returning the current list). With ``entities`` (a function
    of the time zone), one job per entity, as in "09:00 local for every user".
    ``kwargs`` is a mapping, or a function of the ``Firing``. After downtime,
    only the ``catch_up`` most recent missed firings per time zone run."""

    name: str
    task: str
    cron: str
    timezones: Sequence[str] | Callable[[], Iterable[str]] = ("UTC",)
    entities: Callable[[str], Iterable[Any]] | None = None
    kwargs: Mapping[str, Any] | Callable[[Firing], Mapping[str, Any]] = field(default_factory=dict)
    catch_up: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ConfigError(f"schedule name {self.name!r} must be 1-64 letters, digits, '-', '_' or '.'")
        cron(self.cron)
        if isinstance(self.timezones, str):
            object.__setattr__(self, "timezones", (self.timezones,))
        if not callable(self.timezones):
            if not self.timezones:
                raise ConfigError(f"schedule {self.name!r} needs at least one time zone")
            for name in self.timezones:
                zone(name)
        if isinstance(self.catch_up, bool) or not isinstance(self.catch_up, int) or self.catch_up < 0:
            raise ConfigError("catch_up must be an integer of at least 0")

    def per_entity(self, firing: Firing) -> list[Firing]:
        """The firing, or with ``entities`` one per entity of its zone."""
        if self.entities is None:
            return [firing]
        return [firing.for_entity(entity) for entity in self.entities(firing.timezone)]

    def arguments(self, firing: Firing) -> dict[str, Any]:
        """The keyword arguments of a firing's job."""
        return dict(self.kwargs(firing) if callable(self.kwargs) else self.kwargs)

    def fired_now(self, now: datetime, run: str) -> list[Firing]:
        """A firing outside the schedule's times (an operator's "run now"):
        one per zone, and entity, at ``now``, in the slot ``now-{run}`` so
        its keys are its own and the same ``run`` twice fires once."""
        if not isinstance(run, str) or not _NAME.match(run):
            raise ConfigError("a run's key is 1-64 letters, digits, '-', '_' or '.'")
        return [one for tz in self.zones()
                for one in self.per_entity(Firing(self.name, tz, now.astimezone(zone(tz)).replace(tzinfo=None),
                                                  now, f"now-{run}"))]

    def zones(self) -> list[str]:
        names = list(self.timezones() if callable(self.timezones) else self.timezones)
        for name in names:
            zone(name)
        return names

    def firings(self, tz: str, after: datetime, until: datetime) -> list[Firing]:
        """The firings in ``tz`` with ``after < at <= until``, oldest first."""
        return self.window(tz, after, until)[0]

    def window(self, tz: str, after: datetime, until: datetime) -> tuple[list[Firing], Firing | None]:
        """The firings in ``tz`` with ``after < at <= until``, oldest first,
        and the first one after ``until`` (None if there is none within 8
        years), in one pass: a scheduler asks for both on every tick, and
        stepping croniter is most of a tick's cost."""
        info = zone(tz)
        daily, seconds = _granularity(self.cron)
        # Resolution keeps order, so iteration can start at the wall time of
        # ``after``; the firings end at the latest wall time shown up to
        # ``until``, which is later than ``until``'s own just after the clocks
        # fall back. Past that, every nominal time resolves after ``until``.
        start = after.astimezone(info).replace(tzinfo=None)
        end = max(_wall(until - back, info) + back for back in (timedelta(0), _LARGEST_SHIFT / 2, _LARGEST_SHIFT))
        horizon = _wall(until, info) + _HORIZON
        found: list[Firing] = []
        upcoming: Firing | None = None
        times = _times(self.cron, start)
        while (nominal := times.get_next(datetime)) <= horizon:
            at = resolve(nominal, info)
            if after < at <= until:
                found.append(_firing(self.name, tz, nominal, at, daily, seconds))
            elif at > until and upcoming is None:
                upcoming = _firing(self.name, tz, nominal, at, daily, seconds)
            if nominal > end:
                break
        return found, upcoming


_HORIZON = timedelta(days=366 * 8)  # how far ahead the next firing is looked for
_HORIZONS = (timedelta(minutes=1), timedelta(hours=1), timedelta(days=1), timedelta(days=32),
             timedelta(days=367), _HORIZON)


def next_firing(schedule: Schedule, tz: str, after: datetime) -> Firing | None:
    """The first firing in ``tz`` after ``after``, looking up to 8 years ahead."""
    return schedule.window(tz, after, after)[1]


def last_firing(schedule: Schedule, tz: str, until: datetime) -> Firing | None:
    """The latest firing in ``tz`` at or before ``until``."""
    for horizon in _HORIZONS:
        found = schedule.firings(tz, until - horizon, until)
        if found:
            return found[-1]
    return None


def _wall(instant: datetime, info: ZoneInfo) -> datetime:
    return instant.astimezone(info).replace(tzinfo=None)


def resolve(local: datetime, info: ZoneInfo) -> datetime:
    """The instant a nominal local time fires: its first occurrence, or the
    end of the gap when the clocks skip it."""
    first = local.replace(tzinfo=info, fold=0).astimezone(UTC)
    if first.astimezone(info).replace(tzinfo=None) == local:
        return first
    # In a gap, fold=0 maps with the offset before the jump (an instant after
    # it) and fold=1 with the offset after (an instant before it).
    low = int(local.replace(tzinfo=info, fold=1).astimezone(UTC).timestamp())
    high = int(first.timestamp())
    after_jump = first.astimezone(info).utcoffset()
    while low < high:  # the first second on the far side of the jump
        mid = (low + high) // 2
        if datetime.fromtimestamp(mid, UTC).astimezone(info).utcoffset() == after_jump:
            high = mid
        else:
            low = mid + 1
    return datetime.fromtimestamp(high, UTC)


@lru_cache(maxsize=256)
def _parsed(expression: str) -> croniter:
    from croniter import croniter

    return croniter(expression)


def _times(expression: str, start: datetime) -> croniter:
    """A croniter from ``start``: a copy of the expression's parsed one, since
    parsing costs more than the few steps a tick takes. croniter only reads
    the parse, except the sets of "#" weekdays, which it merges into: those
    are copied, so two threads never share one."""
    times = copy.copy(_parsed(expression))
    times.nth_weekday_of_month = {day: set(nths) for day, nths in times.nth_weekday_of_month.items()}
    times.set_current(start, force=True)
    return times


def _firing(name: str, tz: str, nominal: datetime, at: datetime, daily: bool, seconds: bool) -> Firing:
    slot = nominal.date().isoformat() if daily else nominal.isoformat(timespec="seconds" if seconds else "minutes")
    return Firing(name, tz, nominal, at, slot)


@lru_cache(maxsize=256)
def _granularity(expression: str) -> tuple[bool, bool]:
    """(fires at most once a day, has a seconds field)."""
    fields = _parsed(expression).expanded
    minutes, hours = fields[0], fields[1]
    seconds = len(fields) > 5
    daily = not seconds and len(minutes) == 1 and len(hours) == 1 and "*" not in (minutes[0], hours[0])
    return daily, seconds


def missed(firings: list[Firing], now: datetime, catch_up: int, grace: timedelta) -> list[Firing]:
    """What to enqueue of one time zone's firings found in a window: those due
    within ``grace`` of now, and the ``catch_up`` most recent older ones."""
    recent = [f for f in firings if f.at > now - grace]
    older = [f for f in firings if f.at <= now - grace]
    return (older[-catch_up:] if catch_up else []) + recent
