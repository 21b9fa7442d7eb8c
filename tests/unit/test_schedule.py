"""Schedule firings: one per local day at 09:00 in four time zones over a
year, DST gaps and overlaps fire once, keys are the local slot."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from redrive.core.schedule import Firing, Schedule, missed, next_firing
from redrive.errors import ConfigError

ZONES = ["America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata"]
YEAR = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))


@pytest.mark.parametrize("tz", ZONES)
def test_nine_oclock_fires_once_on_every_local_day_of_a_year(tz: str) -> None:
    morning = Schedule("offers", "generate_offers", "0 9 * * *", timezones=[tz])
    firings = morning.firings(tz, *YEAR)
    local_days = [f.local_date for f in firings]
    assert len(local_days) == len(set(local_days))
    # Every day of the year whose 09:00 falls inside the window, nothing else
    expected = [d for d in _days(date(2025, 12, 31), date(2027, 1, 1))
                if YEAR[0] < datetime(d.year, d.month, d.day, 9, tzinfo=ZoneInfo(tz)) <= YEAR[1]]
    assert local_days == expected and len(expected) in (365, 366)
    for f in firings:
        wall = f.at.astimezone(ZoneInfo(tz))
        assert (wall.hour, wall.minute) == (9, 0)  # 09:00 on the wall clock, DST or not
        assert f.key == f"offers:{f.local_date.isoformat()}:{tz}"


def test_a_time_the_clocks_skip_fires_once_when_the_gap_ends() -> None:
    # New York springs forward at 02:00 on 8 March 2026: 02:30 does not exist
    s = Schedule("nightly", "t", "30 2 * * *", timezones=["America/New_York"])
    firings = s.firings("America/New_York", datetime(2026, 3, 7, tzinfo=UTC), datetime(2026, 3, 10, tzinfo=UTC))
    assert [f.slot for f in firings] == ["2026-03-07", "2026-03-08", "2026-03-09"]
    assert firings[1].at == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)  # 03:00 EDT, the gap's end
    # Lord Howe moves 30 minutes, at 02:00 on 4 October 2026
    lh = Schedule("nightly", "t", "15 2 * * *", timezones=["Australia/Lord_Howe"])
    (gap_day,) = [f for f in lh.firings("Australia/Lord_Howe", datetime(2026, 10, 2, tzinfo=UTC),
                                          datetime(2026, 10, 6, tzinfo=UTC)) if f.slot == "2026-10-04"]
    wall = gap_day.at.astimezone(ZoneInfo("Australia/Lord_Howe"))
    assert (wall.hour, wall.minute, wall.utcoffset()) == (2, 30, timedelta(hours=11))


def test_a_time_that_occurs_twice_fires_once_at_its_first_occurrence() -> None:
    # New York falls back at 02:00 on 1 November 2026: 01:30 happens twice
    s = Schedule("nightly", "t", "30 1 * * *", timezones=["America/New_York"])
    firings = s.firings("America/New_York", datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
    assert [(f.slot, f.at) for f in firings] == [("2026-11-01", datetime(2026, 11, 1, 5, 30, tzinfo=UTC))]
    # An hourly schedule on that day has 24 nominal hours, each once, keyed by local time
    hourly = Schedule("hourly", "t", "30 * * * *", timezones=["Europe/London"])
    day = hourly.firings("Europe/London", datetime(2026, 10, 24, 23, 0, tzinfo=UTC),
                         datetime(2026, 10, 25, 23, 59, tzinfo=UTC))
    assert len(day) == 24 and len({f.key for f in day}) == 24
    assert day[1].key == "hourly:2026-10-25T01:30:Europe/London"


def test_windows_that_split_a_day_find_each_firing_once() -> None:
    s = Schedule("offers", "t", "0 9 * * *", timezones=ZONES)
    cuts = [YEAR[0] + timedelta(minutes=211 * i) for i in range(0, 2_500)]  # a year in steps that drift round the clock
    for tz in ZONES:
        found = [f.key for a, b in itertools.pairwise(cuts) for f in s.firings(tz, a, b)]
        assert len(found) == len(set(found)) == len(s.firings(tz, cuts[0], cuts[-1]))


def test_after_downtime_only_the_most_recent_missed_firing_runs() -> None:
    s = Schedule("offers", "t", "0 9 * * *", timezones=["Asia/Kolkata"], catch_up=1)
    now = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)
    firings = s.firings("Asia/Kolkata", now - timedelta(days=5), now)
    assert len(firings) == 5
    assert [f.slot for f in missed(firings, now, 1, timedelta(minutes=1))] == ["2026-06-10"]
    assert missed(firings, now, 0, timedelta(minutes=1)) == []
    assert len(missed(firings, now, 3, timedelta(minutes=1))) == 3
    due = Firing("offers", "Asia/Kolkata", datetime(2026, 6, 10, 17, 29), now - timedelta(seconds=5), "x")
    assert missed([due], now, 0, timedelta(minutes=1)) == [due]  # on time is not missed


@pytest.mark.parametrize(("options", "message"), [
    ({"cron": "61 9 * * *"}, "malformed cron"),
    ({"cron": "every morning"}, "malformed cron"),
    ({"cron": "0 9 30 2 *"}, "never fires"),
    ({"timezones": ["Mars/Olympus_Mons"]}, "unknown time zone"),
    ({"timezones": "Europe/Londn"}, "unknown time zone"),
    ({"timezones": []}, "at least one time zone"),
    ({"name": "two words"}, "schedule name"),
    ({"catch_up": -1}, "catch_up"),
])
def test_bad_schedules_are_config_errors(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Schedule(**{"name": "s", "task": "t", "cron": "0 9 * * *", **options})


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


# Zones whose clocks jump at local midnight, at 02:00, by half an hour, and
# across the date line; expressions daily, in a DST gap, weekly, nth weekday.
@settings(max_examples=300, deadline=None)
@example(cron="30 1 * * *", tz="Europe/London", after=datetime(2026, 10, 25, 1, 20, tzinfo=UTC))  # 01:20 again
@example(cron="30 2 * * *", tz="Europe/London", after=datetime(2026, 3, 29, 0, 59, tzinfo=UTC))  # 02:30 skipped
@given(cron=st.sampled_from(["0 9 * * *", "30 1 * * *", "30 2 * * *", "0 0 * * *", "15 1 * * 1-5", "0 9 * * 1#2", "*/7 * * * *"]),
       tz=st.sampled_from(["America/Santiago", "Asia/Beirut", "Europe/London", "Australia/Lord_Howe",
                           "Pacific/Chatham", "America/St_Johns", "Pacific/Apia"]),
       after=st.datetimes(datetime(2026, 1, 1), datetime(2029, 1, 1), timezones=st.just(UTC)))
def test_the_next_firing_is_the_first_of_the_firings_after(cron: str, tz: str, after: datetime) -> None:
    schedule = Schedule("s", "t", cron, timezones=[tz])
    ahead = timedelta(days=1) if cron.startswith("*") else timedelta(days=40)
    assert next_firing(schedule, tz, after) == schedule.firings(tz, after, after + ahead)[0]


# A scheduler's tick reads a window's firings and the next one in one pass:
# the next one must be the first firing of the window after it.
@settings(max_examples=300, deadline=None)
@example(cron="30 1 * * *", tz="Europe/London", after=datetime(2026, 10, 24, 20, 0, tzinfo=UTC),
         hours=5.0)  # ends at 01:00 UTC, between the two 01:30s
@given(cron=st.sampled_from(["0 9 * * *", "30 1 * * *", "30 2 * * *", "15 1 * * 1-5", "0 9 * * 1#2", "*/7 * * * *"]),
       tz=st.sampled_from(["America/Santiago", "Europe/London", "Australia/Lord_Howe", "Pacific/Chatham"]),
       after=st.datetimes(datetime(2026, 1, 1), datetime(2029, 1, 1), timezones=st.just(UTC)),
       hours=st.floats(0, 60))
def test_a_windows_next_firing_is_the_first_after_it(cron: str, tz: str, after: datetime, hours: float) -> None:
    schedule = Schedule("s", "t", cron, timezones=[tz])
    until = after + timedelta(hours=hours)
    ahead = timedelta(days=1) if cron.startswith("*") else timedelta(days=40)
    found, upcoming = schedule.window(tz, after, until)
    assert upcoming == schedule.firings(tz, until, until + ahead)[0]
    assert all(after < f.at <= until for f in found) and upcoming.at > until
