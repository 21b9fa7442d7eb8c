"""Charts from rollups: over a two-hour run on a moved clock, the API's and
the dashboard's charts count what the store recorded of every attempt, and
still do after the jobs are pruned and the rollups folded into hours."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from redrive import Actor, App, JobNotFound, Permanent, Transient, current_job
from redrive.core.rollups import MINUTES_FOR, WINDOWS
from redrive.http import TokenAuth, create_api
from redrive.http.auth import parse_tokens
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SQLiteStore
from redrive.testing import Clock, drain
from tests.http.conftest import SPECS, as_
from tests.http.test_dashboard import _browser

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)  # on the hour: the run fills two hours exactly
MINUTES = 120


def _app(kind: str, clock: Clock, tmp_path, request) -> App:
    store = (SQLiteStore(str(tmp_path / "charts.db"), clock=clock) if kind == "sqlite"
             else PostgresStore(request.getfixturevalue("pg_url"), clock=clock))
    app = App(store=store)

    @app.task(max_attempts=3)
    def resize(n: int) -> int:
        return n

    @app.task(max_attempts=3)
    def fetch(n: int) -> int:
        if current_job().attempts == 1:
            raise Transient("upstream 503", code="UPSTREAM_5XX", retry_after=timedelta(seconds=2))
        return n

    @app.task
    def parse(n: int) -> None:
        raise Permanent("not a PDF", code="NOT_PDF")

    return app


def _recorded(app: App, job_ids: list) -> Counter:
    """What the store recorded of each attempt's end: (hour, minute, task, how) -> n."""
    counted: Counter = Counter()
    for job_id in job_ids:
        job = app.client.job(job_id)
        for event in app.store.job_events_list(job_id=job_id):
            if event.from_status is not None and event.from_status.value == "running":
                how = "retried" if event.to_status.value == "queued" else event.to_status.value
                counted[(event.at.replace(minute=0, second=0, microsecond=0), event.at.replace(second=0, microsecond=0),
                         job.task, how)] += 1
    return counted


def _by(counted: Counter, slot: int) -> Counter:
    """(slot start, task, how) -> n, slot 0 the hour, 1 the minute."""
    out: Counter = Counter()
    for key, n in counted.items():
        out[(key[slot], key[2], key[3])] += n
    return out


def _charted(api, window: str) -> Counter:
    body = api.get("/api/v1/charts", params={"window": window, "by": "task"})
    assert body.status_code == 200, body.text
    out: Counter = Counter()
    for series in body.json()["series"]:
        for slot in series["slots"]:
            for how in ("succeeded", "failed", "retried", "cancelled"):
                if slot[how]:
                    out[(datetime.fromisoformat(slot["start"]), series["key"], how)] += slot[how]
    return out


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_charts_count_what_the_store_recorded_over_two_hours_after_the_jobs_are_pruned(kind, tmp_path, request):
    clock = Clock(START)
    app = _app(kind, clock, tmp_path, request)
    try:
        # Given two hours of work, a different mix each minute
        job_ids = []
        for minute in range(MINUTES):
            clock.now = START + timedelta(minutes=minute)
            job_ids += [app.enqueue("resize", args=[n]).job.id for n in range(minute % 4 + 1)]
            if minute % 5 == 0:
                job_ids.append(app.enqueue("fetch", args=[minute]).job.id)
            if minute % 7 == 0:
                job_ids.append(app.enqueue("parse", args=[minute]).job.id)
            drain(app, clock=clock, until=timedelta(seconds=50))  # a retry's 2 s pass within the minute
        clock.now = START + timedelta(minutes=MINUTES, seconds=30)
        recorded = _recorded(app, job_ids)
        assert sum(recorded.values()) == len(job_ids) + MINUTES // 5  # every job once, and each fetch's retry
        served = create_api(app, auth=TokenAuth(parse_tokens(SPECS)))
        api = as_("operator", served)

        # When the jobs are pruned
        clock.advance(timedelta(minutes=5))
        pruned = app.admin(Actor.operator("test")).prune(timedelta(minutes=1))
        assert pruned >= len(job_ids) - MINUTES // 7 - 1  # the failed ones wait on their open dead letters
        with pytest.raises(JobNotFound):
            app.client.job(job_ids[0])

        # Then the last hour, minute by minute, and the two hours, hour by hour, are what the store recorded
        since = WINDOWS["1h"].start(clock())
        last_hour = Counter({k: n for k, n in _by(recorded, 1).items() if k[0] >= since})
        assert last_hour and since > START
        assert _charted(api, "1h") == last_hour
        assert _charted(api, "24h") == _by(recorded, 0)
        # and so is the page, series by series
        html = _browser(served, "operator").get("/charts", params={"window": "24h", "by": "task"}).text
        for task in ("resize", "fetch", "parse"):
            section = re.search(rf'<section data-series="{task}">(.*?)</section>', html, re.S).group(1)
            shown = {how: int(n) for how, n in re.findall(r'data-total="(\w+)">(\d+)<', section)}
            wanted = {how: sum(n for (_, t, h), n in _by(recorded, 0).items() if t == task and h == how)
                      for how in ("succeeded", "retried", "failed", "cancelled")}
            assert shown == wanted

        # And once the minutes are folded into hours, the week's chart still adds up
        clock.advance(MINUTES_FOR)
        app.store.rollups_compact()
        week = _charted(api, "7d")
        assert sum(week.values()) == sum(recorded.values())
        assert {start for start, _, _ in week} == {START.replace(hour=6)}  # six-hour slots: 06:00 to 12:00
        assert _totals(week) == _totals(_by(recorded, 0))
    finally:
        app.close()


def _totals(counted: Counter) -> Counter:
    out: Counter = Counter()
    for (_, task, how), n in counted.items():
        out[(task, how)] += n
    return out
