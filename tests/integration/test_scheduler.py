"""The scheduler against real stores: a year of ticks on an injected clock,
restarts and two schedulers at once, catch-up after downtime, and two
`redrive scheduler` processes creating no duplicate."""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from redrive import App, ConfigError, Scheduler, job_id_for
from redrive.testing import wait_for
from tests.apps.scheduled import USERS, ZONES, with_offers
from tests.conftest import every_job
from tests.integration.processes import REPO


def _offers(app: App) -> list:
    return every_job(app.client, task="generate_offers")


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_a_year_of_ticks_fires_once_per_local_day_per_user_with_restarts_and_twins(sqlite_url: str) -> None:
    app = with_offers(App(sqlite_url))
    rng = random.Random(4)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    first = Scheduler(app.client)
    ticks = []
    twin = Scheduler(with_offers(App(sqlite_url)).client)  # another process's scheduler, its clock a little behind
    while now < datetime(2027, 1, 1, tzinfo=UTC):
        now += timedelta(hours=3, minutes=rng.randint(-50, 50))
        first.tick(now)
        ticks.append(now)
        if rng.random() < 0.3:
            twin.tick(now - timedelta(seconds=rng.randint(0, 90)))
        if rng.random() < 0.01:
            first = Scheduler(app.client)  # a restart: nothing kept in memory
    jobs = _offers(app)
    per_day = Counter((j.kwargs["timezone"], j.kwargs["user"], j.kwargs["date"]) for j in jobs)
    assert set(per_day.values()) == {1}
    for tz in ZONES:
        days = {d for (zone, _, d) in per_day if zone == tz}
        # every local day whose 09:00 came after the first tick (first sight), up to the last
        expected = {d.isoformat() for d in (date(2026, 1, 1) + timedelta(n) for n in range(-1, 367))
                    if ticks[0] < datetime(d.year, d.month, d.day, 9, tzinfo=ZoneInfo(tz)) <= ticks[-1]}
        assert days == expected and len(days) >= 364
        for user in USERS[tz]:
            assert sum(1 for (zone, u, _) in per_day if (zone, u) == (tz, user)) == len(days)
    # DST days included: the Sundays the clocks change in each zone
    for tz, day in [("America/New_York", "2026-03-08"), ("America/New_York", "2026-11-01"),
                    ("Europe/London", "2026-03-29"), ("Europe/London", "2026-10-25"),
                    ("Australia/Lord_Howe", "2026-04-05"), ("Australia/Lord_Howe", "2026-10-04")]:
        assert per_day[(tz, USERS[tz][0], day)] == 1
    job = next(j for j in jobs if j.kwargs == {"date": "2026-03-08", "timezone": "America/New_York",
                                                 "user": USERS["America/New_York"][0]})
    key = f"offers:2026-03-08:America/New_York:{USERS['America/New_York'][0]}"
    assert (job.idempotency_key, job.id) == (key, job_id_for("generate_offers", key))
    app.close()


def test_after_downtime_only_the_most_recent_missed_firing_is_caught_up(db_url: str) -> None:
    app = with_offers(App(db_url))
    start = datetime(2026, 6, 1, 0, 0, tzinfo=UTC)
    scheduler = Scheduler(app.client)
    scheduler.tick(start)  # first sight: nothing before now is caught up
    assert _offers(app) == []
    made = scheduler.tick(start + timedelta(days=6))  # six days down
    dates = Counter((r.job.kwargs["timezone"], r.job.kwargs["date"]) for r in made)
    assert sorted(dates) == sorted({(tz, max(d for (z, d) in dates if z == tz)) for tz in ZONES})
    assert set(dates.values()) == {3}  # one firing per zone, for each of its three users
    # A manual re-run of the same window creates nothing
    again = Scheduler(app.client).tick(start + timedelta(days=6))
    assert again == [] and len(_offers(app)) == 12
    app.close()


@pytest.mark.slow
def test_two_scheduler_processes_create_no_duplicate(db_url: str, tmp_path) -> None:
    app = App(db_url)
    _ = app.store  # migrated
    env = {**os.environ, "PYTHONPATH": str(REPO), "REDRIVE_DATABASE_URL": db_url}
    paths = [tmp_path / f"scheduler-{n}.log" for n in range(2)]
    procs = []
    for path in paths:
        with open(path, "w") as log:
            procs.append(subprocess.Popen([sys.executable, "-m", "redrive", "scheduler", "tests.apps.scheduled:app",
                                           "--interval", "0.2"], cwd=REPO, env=env, stderr=log, text=True))
    wait_for(lambda: all("scheduler started" in path.read_text() for path in paths), timeout=30,
             what="both schedulers started")

    def fired_in_each_zone() -> int:
        keys = [j.idempotency_key or "" for j in app.client.jobs(task="pulse", limit=1000).items]
        return min(sum(k.endswith(f":{zone}") for k in keys) for zone in ("UTC", "Asia/Kolkata"))

    # Both running, each zone fires three times more: every firing met both schedulers
    before = fired_in_each_zone()
    wait_for(lambda: fired_in_each_zone() >= before + 3, timeout=30, every=0.2, what="three more firings a zone")
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        proc.wait(timeout=30)
    logs = [path.read_text() for path in paths]
    assert [proc.returncode for proc in procs] == [0, 0], logs
    pulses = app.client.jobs(task="pulse", limit=1000)
    keys = Counter(j.idempotency_key for j in pulses)
    assert set(keys.values()) == {1}
    # Both zones fired every two seconds, each firing once
    per_zone = Counter(k.rsplit(":", 1)[-1] for k in keys)
    assert per_zone.keys() == {"UTC", "Asia/Kolkata"} and min(per_zone.values()) >= 2
    slots = sorted(datetime.fromisoformat(k.split(":", 1)[1].rsplit(":", 1)[0]) for k in keys if k.endswith("UTC"))
    assert all(b - a == timedelta(seconds=2) for a, b in itertools.pairwise(slots))
    assert all("scheduler started with 2 schedule(s)" in log for log in logs)  # both were running
    app.close()


def test_bad_schedules_are_refused_at_declaration(sqlite_url: str) -> None:
    app = App(sqlite_url)
    app.task(lambda: None, name="t")
    for options, message in [
        ({"cron": "0 25 * * *"}, "malformed cron expression"),
        ({"cron": "0 9 * * *", "timezones": ["Europe/Atlantis"]}, "unknown time zone"),
    ]:
        with pytest.raises(Exception, match=message) as refused:
            app.schedule("s", "t", **options)
        assert refused.value.code == "CONFIG_INVALID"
    with pytest.raises(Exception, match="no task named 'missing'"):
        app.schedule("s", "missing", "0 9 * * *")
    app.schedule("s", "t", "0 9 * * *")
    with pytest.raises(Exception, match="declared twice"):
        app.schedule("s", "t", "0 10 * * *")


@pytest.mark.slow
@pytest.mark.pgbouncer
def test_a_worker_can_run_the_schedules_too(db_url: str, tmp_path, workers) -> None:
    from redrive.testing import wait_for
    from tests.integration.processes import WorkerProcess

    worker = WorkerProcess(db_url, tmp_path, "--schedules", "--poll-interval", "0.2", app="tests.apps.scheduled:app")
    workers.append(worker)
    app = App(db_url)
    wait_for(lambda: len([j for j in app.client.jobs(task="pulse") if j.status == "succeeded"]) >= 2, timeout=20)
    assert worker.stop() == 0
    assert "scheduler started with 2 schedule(s)" in worker.log
    app.close()


def test_a_scheduler_ticking_often_through_a_gap_and_an_overlap_skips_and_repeats_nothing(sqlite_url: str) -> None:
    """A long-lived scheduler remembers when each zone fires next and skips
    the ticks before it; around the clocks changing, 02:30 in New York does
    not exist (it fires at 03:00) or comes twice (it fires at the first)."""
    app = App(sqlite_url)
    app.task(lambda day: None, name="nightly")
    app.schedule("nightly", "nightly", "30 1,2 * * *", timezones=["America/New_York"],
                 kwargs=lambda f: {"day": f.slot})
    scheduler = Scheduler(app.client)
    fired: list = []
    for start in (datetime(2026, 3, 7, 5, tzinfo=UTC), datetime(2026, 10, 31, 4, tzinfo=UTC)):
        now = start
        scheduler.tick(now)
        while now < start + timedelta(days=2):
            now += timedelta(minutes=7)
            fired += [(r.job.kwargs["day"], r.job.run_at) for r in scheduler.tick(now) if not r.duplicate]
    slots = [slot for slot, _ in fired]
    assert len(slots) == len(set(slots)) == 8  # 01:30 and 02:30 on each of four local days
    assert "2026-03-08T02:30" in slots and "2026-11-01T01:30" in slots
    assert Counter(slot[:10] for slot in slots) == {"2026-03-07": 2, "2026-03-08": 2, "2026-10-31": 2,
                                                     "2026-11-01": 2}
    app.close()


def test_an_operator_runs_a_schedule_now_once_per_form_and_its_times_go_on(sqlite_url: str) -> None:
    from redrive import Actor

    app = App(sqlite_url)
    app.task(lambda: None, name="digest")
    app.schedule("nightly", "digest", "0 3 * * *", timezones=["UTC", "Asia/Kolkata"], kwargs={"kind": "daily"})
    ops = app.admin(Actor.operator("ops:ann"))
    first = ops.run_schedule("nightly", run="f00d")
    again = ops.run_schedule("nightly", run="f00d")  # the same form sent twice
    other = ops.run_schedule("nightly", run="beef")
    assert [r.duplicate for r in first] == [False, False] and [r.duplicate for r in again] == [True, True]
    assert sorted(r.job.idempotency_key for r in first) == ["nightly:now-f00d:Asia/Kolkata", "nightly:now-f00d:UTC"]
    assert [r.duplicate for r in other] == [False, False]
    assert {r.job.kwargs["kind"] for r in first} == {"daily"}
    assert [(e.action, e.detail["jobs"]) for e in ops.audit_trail()] == [("run_schedule", 2), ("run_schedule", 2)]
    assert app.store.schedules_list() == []  # its regular firings' checkpoint is untouched
    with pytest.raises(ConfigError, match="no schedule named 'weekly'"):
        ops.run_schedule("weekly", run="x")
    app.close()


def test_a_paused_schedule_skips_its_firings_and_fires_again_from_its_next_time(sqlite_url: str) -> None:
    from redrive import Actor
    from redrive.store.sqlite.store import SQLiteStore
    from redrive.testing import Clock

    clock = Clock(datetime(2026, 3, 2, 8, 0, tzinfo=UTC))
    app = App(store=SQLiteStore(sqlite_url.removeprefix("sqlite:///"), clock=clock))
    app.task(lambda: None, name="digest")
    app.schedule("hourly", "digest", "0 * * * *")
    scheduler = Scheduler(app.client, clock=clock)
    ops = app.admin(Actor.operator("ops:ann"))
    scheduler.tick()
    clock.advance(timedelta(hours=1))
    assert len(scheduler.tick()) == 1  # 09:00
    assert ops.pause_schedule("hourly") and not ops.pause_schedule("hourly")
    clock.advance(timedelta(hours=3))
    assert scheduler.tick() == []  # 10:00, 11:00 and 12:00 skipped
    assert ops.resume_schedule("hourly")
    assert scheduler.tick() == []  # not caught up on resume
    clock.advance(timedelta(hours=1))
    (made,) = scheduler.tick()
    assert made.job.idempotency_key.startswith("hourly:2026-03-02T13")
    assert [e.action for e in ops.audit_trail()] == ["pause_schedule", "resume_schedule"]
    with pytest.raises(ConfigError, match="no schedule named 'weekly'"):
        ops.pause_schedule("weekly")
    app.close()
