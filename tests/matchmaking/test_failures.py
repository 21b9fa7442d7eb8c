"""The design's retry table and monitoring: transient database errors are
retried (30 s, 2 min, 5 min, scaled down here), logic errors and data
inconsistencies are not and tell on-call, and the four monitoring
thresholds are alert rules."""

from __future__ import annotations

import random
from datetime import timedelta

import psycopg
import pytest
from matchmaking.db import Db
from matchmaking.settings import Settings
from matchmaking.tasks import TASK, create_tables, make_app
from matchmaking.users import add

from redrive import Actor
from redrive.alerts import Check, DurationPercentile, FailureRate, QueueDepth
from redrive.core.alerts import Reading
from redrive.testing import wait_for
from tests.examples import Example
from tests.fakes.slack import slack_webhook

AT = "2027-03-01T09:00:00+00:00"
READING = Reading(now=0.0)


def _setup(tmp_path, url: str, **env: str):
    settings = Settings(database_url=url)
    create_tables(settings)
    with Db(url) as db:
        add(db, [(f"user-{n}", "UTC", "2027-01-01", ["chess", "jazz"]) for n in range(5)])
    example = Example("matchmaking", tmp_path, {"DATABASE_URL": url, "RETRY_DELAYS_S": "0.5,1,1.5",
                                                 "REDRIVE_WORKER_POLL_INTERVAL": "0.2", **env})
    return settings, make_app(settings), example


@pytest.mark.parametrize("example_db", ["postgres"], indirect=True)
def test_a_transient_database_error_is_retried(tmp_path, example_db) -> None:
    _, app, example = _setup(tmp_path, example_db, DB_LOCK_TIMEOUT_MS="300")
    try:
        example.start("worker")
        wait_for(lambda: " started: " in example.log("worker"), timeout=30, what="the worker")
        admin = app.admin(Actor.operator("test"))
        with psycopg.connect(example_db) as blocker:  # holds the table past the job's lock timeout
            blocker.execute("LOCK TABLE matchmaking_jobs IN ACCESS EXCLUSIVE MODE")
            job = app.enqueue(TASK, kwargs={"date": "2027-03-01", "timezone": "UTC", "user_id": "user-1", "at": AT})
            wait_for(lambda: admin.job(job.job.id).attempts >= 1 and admin.job(job.job.id).status.value == "queued",
                     timeout=30, what="the first attempt failing")
            first = admin.job(job.job.id)
            assert first.last_error_code == "DB_TRANSIENT"
        done = _wait(admin, job.job.id, "succeeded")
        assert done.attempts == 2
        with Db(example_db) as db:
            row = db.one("SELECT status, offers FROM matchmaking_jobs WHERE user_id = 'user-1'")
        assert row is not None and row["status"] == "completed"
        admin.close()
    finally:
        example.stop()
        app.close()


def test_a_logic_error_is_not_retried_and_tells_on_call(tmp_path, example_db) -> None:
    with slack_webhook() as slack:
        _, app, example = _setup(tmp_path, example_db, REDRIVE_SLACK_WEBHOOK_URL=slack.url,
                                 REDRIVE_NOTIFY_WINDOW="1s")
        try:
            # The user moved to Tokyo after the UTC firing: the job's data no longer holds.
            with Db(example_db) as db:
                db.run("UPDATE users SET timezone = 'Asia/Tokyo' WHERE id = 'user-2'")
            job = app.enqueue(TASK, kwargs={"date": "2027-03-01", "timezone": "UTC", "user_id": "user-2", "at": AT})
            example.start("worker")
            admin = app.admin(Actor.operator("test"))
            failed = _wait(admin, job.job.id, "failed")
            assert (failed.attempts, failed.error_code) == (1, "DATA_INCONSISTENCY")
            letter, = admin.dead_letters(task=TASK)
            assert letter.error_class == "DATA_INCONSISTENCY"
            with Db(example_db) as db:
                row = db.one("SELECT status, error_message FROM matchmaking_jobs WHERE user_id = 'user-2'")
            assert row is not None and row["status"] == "failed" and "Asia/Tokyo" in row["error_message"]
            wait_for(lambda: any("generate_offers" in m for m in slack.messages), timeout=30, what="on-call being told")
            assert "DATA_INCONSISTENCY" in next(m for m in slack.messages if "generate_offers" in m)
            admin.close()
        finally:
            example.stop()
            app.close()


def _wait(admin, job_id, status: str):
    wait_for(lambda: admin.job(job_id).status.value == status, timeout=60, what=f"job {job_id} {status}")
    return admin.job(job_id)


def test_the_retry_policy_and_the_four_monitoring_thresholds(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    settings = Settings.from_env({"DATABASE_URL": url})
    create_tables(settings)
    app = make_app(settings)
    try:
        task = app.registry.task(TASK)
        assert task.max_attempts == 4  # the first try and 3 retries
        assert [task.backoff.delay(n, rng=random.Random(1)).total_seconds() for n in (1, 2, 3)] == [30, 120, 300]
        rules = {rule.name: rule for rule in app.registry.alert_rules.values()}
        failure = next(r for r in rules.values() if isinstance(r, FailureRate))
        duration = next(r for r in rules.values() if isinstance(r, DurationPercentile))
        depth = next(r for r in rules.values() if isinstance(r, QueueDepth))
        duplicates = next(r for r in rules.values() if isinstance(r, Check))
        assert (failure.above, duration.above, duration.percentile, depth.above) == (
            0.01, timedelta(minutes=5), 0.95, 1000)
        assert duplicates.check(READING)[0] is False
        with Db(url) as db:  # a second batch for a user-day, as a bug would write it
            add(db, [("u1", "UTC", "2027-01-01", ["chess"])])
            for n in range(settings.offers_per_day + 1):
                db.run("INSERT INTO offers (id, date, user_id, candidate_id, score, algorithm, offered_at, "
                       "expires_at) VALUES (%s, '2027-03-01', 'u1', %s, 1, 'x', '', '')", f"o{n}", f"c{n}")
        fires, why = duplicates.check(READING)
        assert fires and "1 user-days" in why
    finally:
        app.close()
