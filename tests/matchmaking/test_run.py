"""A zone's day as a workflow: the 09:00 firing's job spawns one step per
user and a summary that runs once, after every user's job has ended; the
summary records the run (offers made, failures, duration) and tells
on-call, on a local Slack webhook, when more than 1 % of the users failed.
A firing run again, or its job retried, makes nothing twice; ``rerun`` is
a run of its own, with its own summary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from matchmaking.db import Db
from matchmaking.settings import Settings
from matchmaking.tasks import RUN, SUMMARY, TASK, create_tables, make_app
from matchmaking.users import spread

from redrive import Actor, Scheduler, Status
from redrive.testing import drain
from tests.examples import BOTH_STORES, Example
from tests.fakes.slack import slack_webhook

ZONE = "Asia/Kathmandu"  # +05:45
FIRING = datetime(2027, 3, 1, 3, 15, tzinfo=UTC)  # 09:00 there
USERS, BROKEN = 300, 4  # 4 of 300 fail: 1.3 %, over the 1 % threshold


@BOTH_STORES
def test_a_zones_day_ends_with_one_summary_that_tells_on_call_past_one_percent(
    tmp_path, example_db, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with slack_webhook() as slack:
        monkeypatch.setenv("REDRIVE_SLACK_WEBHOOK_URL", slack.url)
        settings = Settings(database_url=example_db)
        create_tables(settings)
        with Db(example_db) as db:
            people = spread(db, USERS, zones=(ZONE,))
        app = make_app(settings)
        try:
            clock = {"now": FIRING - timedelta(minutes=1)}
            schedulers = [Scheduler(app.client, clock=lambda: clock["now"], grace=timedelta(hours=1)) for _ in "ab"]
            for scheduler in schedulers:
                scheduler.tick()
            clock["now"] = FIRING + timedelta(seconds=1)
            made = [r.job for scheduler in schedulers for r in scheduler.tick() if not r.duplicate]
            assert [job.task for job in made] == [RUN], "one job per zone and day, however many schedulers"
            # The firing's job runs alone, and spawns the day
            assert drain(app, max_attempts=1).succeeded == 1
            ops = app.admin(Actor.operator("test"))
            (day,) = ops.workflows()
            assert day.spawned_by == made[0].id and day.key == f"matchmaking:2027-03-01:{ZONE}"
            assert day.counts["users"] == {Status.QUEUED: USERS} and day.counts["summary"] == {Status.PENDING: 1}
            with Db(example_db) as db:  # four users move away before their jobs run: a data inconsistency each
                for user in people[:BROKEN]:
                    db.run("UPDATE users SET timezone = 'UTC' WHERE id = %s", user)
            drain(app)
            assert ops.workflow(day.id).counts == {"users": {Status.SUCCEEDED: USERS - BROKEN, Status.FAILED: BROKEN},
                                                   "summary": {Status.SUCCEEDED: 1}}
            assert len(ops.jobs(task=SUMMARY).items) == 1
            with Db(example_db) as db:
                (run,) = db.rows("SELECT * FROM matchmaking_runs")
            assert (run["users"], run["failures"], run["offers"], run["alerted"]) == (
                USERS, BROKEN, (USERS - BROKEN) * settings.offers_per_day, 1)
            assert run["failure_rate"] == pytest.approx(BROKEN / USERS)
            told = [m for m in slack.messages if "Matchmaking run 2027-03-01" in m]
            assert len(told) == 1 and f"{BROKEN} of {USERS} users got no offers" in told[0], slack.messages
            assert "DATA_INCONSISTENCY: 4" in told[0]

            # The firing again (a scheduler restarted with the checkpoint lost) and its job retried: nothing new
            again = Scheduler(app.client, clock=lambda: clock["now"], grace=timedelta(hours=1))
            again.tick(FIRING - timedelta(minutes=1))
            assert all(r.duplicate for r in again.tick())
            (job,) = ops.jobs(task=RUN).items
            ops.retry(job.id) if job.status is Status.FAILED else None
            drain(app)
            assert len(ops.workflows()) == 1 and len(ops.jobs(task=TASK, limit=1000).items) == USERS
        finally:
            app.close()


@BOTH_STORES
def test_a_rerun_is_a_workflow_of_its_own_with_its_own_summary(tmp_path, example_db) -> None:
    settings = Settings(database_url=example_db)
    create_tables(settings)
    with Db(example_db) as db:
        spread(db, 12, zones=(ZONE,))
    example = Example("matchmaking", tmp_path, {"DATABASE_URL": example_db})
    app = make_app(settings)
    try:
        for _ in range(2):
            assert example.run("rerun", "2027-03-01", ZONE).returncode == 0
        drain(app)
        with Db(example_db) as db:
            runs = db.rows("SELECT users, failures, alerted FROM matchmaking_runs")
            batches = db.one("SELECT count(*) AS n FROM matchmaking_jobs")
        assert [(r["users"], r["failures"], r["alerted"]) for r in runs] == [(12, 0, 0), (12, 0, 0)]
        assert batches is not None and batches["n"] == 12  # each user's day once, however often it runs
        assert len(app.admin(Actor.operator("test")).workflows()) == 2
    finally:
        app.close()
