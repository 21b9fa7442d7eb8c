"""A simulated year of 09:00-local firings over every time zone of the
example (30- and 45-minute offsets, DST gaps at midnight, both sides of the
date line), with two schedulers and workers restarted all along: zero
duplicate offers, exactly one offer batch per user per local day, one
summary per zone and day, and the same offers when a day is run again."""

from __future__ import annotations

import json
import random
import signal
from collections import Counter
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from matchmaking.db import Db
from matchmaking.settings import Settings
from matchmaking.tasks import RUN, SUMMARY, TASK, create_tables, make_app
from matchmaking.users import ZONES, spread

from redrive import Actor, Scheduler
from redrive.testing import wait_for
from tests.examples import Example

START, END = datetime(2027, 1, 1, tzinfo=UTC), datetime(2028, 1, 1, tzinfo=UTC)
MIDNIGHT_GAPS = {"America/Santiago", "America/Havana", "Asia/Beirut", "Africa/Cairo"}


def _expected(users: dict[str, str]) -> set[tuple[str, str]]:
    """(local date, user) for every 09:00 local in the year, worked out with zoneinfo alone."""
    found = set()
    for user, tz in users.items():
        zone = ZoneInfo(tz)
        day = (START - timedelta(days=2)).date()
        while day <= (END + timedelta(days=2)).date():
            at = datetime.combine(day, time(9), zone).astimezone(UTC)
            if START < at <= END:
                found.add((day.isoformat(), user))
            day += timedelta(days=1)
    return found


def _gap_at_midnight(tz: str) -> bool:
    """The zone skips local midnight at least once in the year (DST starts at 00:00)."""
    zone = ZoneInfo(tz)
    day = START.date()
    while day < END.date():
        midnight = datetime.combine(day, time(0), zone)
        if midnight.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != midnight.replace(tzinfo=None):
            return True
        day += timedelta(days=1)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("example_db", ["postgres"], indirect=True)
def test_a_simulated_year_gives_one_batch_per_user_and_local_day(tmp_path, example_db) -> None:
    assert len(ZONES) >= 30
    assert sum(1 for tz in ZONES if _gap_at_midnight(tz)) >= 2, "no zone jumps over midnight in this tzdata"
    assert {"Asia/Kathmandu", "Australia/Eucla", "Asia/Kolkata", "America/St_Johns"} <= set(ZONES)
    settings = Settings(database_url=example_db)
    create_tables(settings)
    with Db(example_db) as db:
        ids = spread(db, len(ZONES), joined_on="2026-12-01")  # one user in each zone
        users = {r["id"]: r["timezone"] for r in db.rows("SELECT id, timezone FROM users")}
    assert len(users) == len(ids)
    expected = _expected(users)

    example = Example("matchmaking", tmp_path, {"DATABASE_URL": example_db, "WORKER_LEASE_TTL_SEC": "3",
                                                 "REDRIVE_WORKER_POLL_INTERVAL": "0.2"})
    app = make_app(settings)
    rng = random.Random(2027)
    try:
        workers = [example.start("worker") for _ in range(2)]
        now = START
        clock = {"now": now}
        schedulers = [Scheduler(app.client, clock=lambda: clock["now"], grace=timedelta(hours=13)) for _ in range(2)]
        for scheduler in schedulers:  # the schedule goes live at the start of the year
            scheduler.tick(START)
        restarts = kills = 0
        while now < END:
            now = min(END, now + timedelta(hours=rng.uniform(3, 12)))
            clock["now"] = now
            for scheduler in rng.sample(schedulers, len(schedulers)):  # both, in either order, a little apart
                scheduler.tick(now - timedelta(minutes=rng.uniform(0, 5)))
            if rng.random() < 0.04:  # a scheduler restarts: a new one, reading the store's checkpoint
                schedulers[rng.randrange(2)] = Scheduler(app.client, clock=lambda: clock["now"],
                                                         grace=timedelta(hours=13))
                restarts += 1
            # A worker dies (or is stopped) and another starts: 17 times in the year
            # (33 took the test's CPU from 59 s to 69 s, under load the suite's tail)
            if rng.random() < 0.015:
                victim = workers.pop(rng.randrange(len(workers)))
                if rng.random() < 0.5:
                    example.kill(victim)
                else:
                    victim.send_signal(signal.SIGTERM)
                    victim.wait(timeout=60)
                kills += 1
                workers.append(example.start("worker"))
        for scheduler in schedulers:  # the year's last tick
            scheduler.tick(END)
        assert restarts >= 3 and kills >= 3
        admin = app.admin(Actor.operator("test"))
        wait_for(lambda: not _busy(admin),
                 timeout=600, what="the year's jobs draining")
        assert not admin.jobs(task=TASK, status="failed", limit=1)

        with Db(example_db) as db:
            batches = db.rows("SELECT date, user_id, status, offers FROM matchmaking_jobs")
            offers = db.rows("SELECT id, date, user_id FROM offers")
        assert {(b["date"], b["user_id"]) for b in batches} == expected  # one per user and local day, no more
        assert all(b["status"] == "completed" and len(json.loads(b["offers"])) == 3 for b in batches)
        per_day = Counter((o["date"], o["user_id"]) for o in offers)
        assert set(per_day) == expected and set(per_day.values()) == {3}  # zero duplicate offers
        jobs = sum(1 for _ in _all_jobs(admin))
        assert jobs == len(expected)  # one job per firing and user, however many schedulers ticked
        summaries = list(_all_jobs(admin, SUMMARY))
        firings = {(j.kwargs["date"], j.kwargs["timezone"]) for j in _all_jobs(admin, RUN)}
        assert len(summaries) == len(firings) and all(j.status == "succeeded" for j in summaries)

        # The same offers when a day is run again: as it is, and after wiping it.
        day, zone = _dst_day(users)
        people = sorted(u for u, tz in users.items() if tz == zone)
        before = _offers_of(example_db, day, people)
        assert example.run("rerun", day, zone).returncode == 0
        wait_for(lambda: not _busy(admin),
                 timeout=30, what="the re-run")
        assert _offers_of(example_db, day, people) == before
        with Db(example_db) as db:
            for user in people:
                db.run("DELETE FROM offers WHERE date = %s AND user_id = %s", day, user)
                db.run("DELETE FROM matchmaking_jobs WHERE date = %s AND user_id = %s", day, user)
        assert example.run("rerun", day, zone).returncode == 0
        wait_for(lambda: not _busy(admin),
                 timeout=30, what="the second re-run")
        assert _offers_of(example_db, day, people) == before
        admin.close()
    finally:
        example.stop()
        app.close()


def _busy(admin) -> bool:
    """A job of any of the day's tasks not ended: a firing's, a user's, a summary's (or waiting on them)."""
    return bool(admin.jobs(status=["scheduled", "queued", "running", "pending"], limit=1))


def _all_jobs(admin, task: str = TASK):
    after = None
    while True:
        page = admin.jobs(task=task, after=after, limit=1000)
        yield from page
        if not page.more:
            return
        after = page.next_cursor


def _dst_day(users: dict[str, str]) -> tuple[str, str]:
    """A zone whose clocks jump at midnight, and the local day they do."""
    zone_name = next(tz for tz in sorted(set(users.values())) if tz in MIDNIGHT_GAPS and _gap_at_midnight(tz))
    zone = ZoneInfo(zone_name)
    day = START.date()
    while True:
        midnight = datetime.combine(day, time(0), zone)
        if midnight.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != midnight.replace(tzinfo=None):
            return day.isoformat(), zone_name
        day += timedelta(days=1)


def _offers_of(url: str, day: str, people: list[str]) -> list[tuple]:
    with Db(url) as db:
        return sorted((r["user_id"], r["id"], r["candidate_id"], r["score"], r["offered_at"], r["expires_at"])
                      for user in people
                      for r in db.rows("SELECT * FROM offers WHERE date = %s AND user_id = %s", day, user))


def test_the_gap_check_sees_a_midnight_jump() -> None:
    assert _gap_at_midnight("America/Santiago") or _gap_at_midnight("America/Havana")
    assert not _gap_at_midnight("Asia/Kolkata")
