"""``raise redrive.Snooze(delay)``: the job runs again after the delay with
no attempt spent, each snooze numbered in its history, counted apart from
attempts, and bounded by its task's ``max_snoozes`` (then ``SNOOZE_LIMIT``,
for good), on every store."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from redrive import App, ConfigError, Settings, Snooze, Status, current_job
from redrive.testing import drain


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: Any, tmp_path: Any) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'redrive.db'}"
    return request.getfixturevalue("pg_url")


def _fast(url: str) -> App:
    """An app whose commits do not wait for the disk: 2,000 of them here
    (a claim and a requeue a snooze), and durability is not what is tested."""
    if url.startswith("postgresql"):
        return App(f"{url}{'&' if '?' in url else '?'}options=-c%20synchronous_commit%3Doff")
    return App(settings=Settings.load(database_url=url, sqlite_synchronous="normal"))


def test_a_thousand_snoozes_leave_the_attempts_unchanged(url: str) -> None:
    app, runs = _fast(url), []

    @app.task(max_snoozes=1000, max_attempts=3)
    def wait_for_report(day: str) -> str:
        runs.append(current_job().attempts)
        if len(runs) <= 1000:
            raise Snooze(timedelta(0))
        return f"report of {day}"

    job = wait_for_report.enqueue("2026-11-29").job
    drain(app, queue="default", max_attempts=1001)
    done = app.client.job(job.id)
    assert (done.status, done.attempts, done.result) == (Status.SUCCEEDED, 1, "report of 2026-11-29")
    assert set(runs) == {1}  # every run was the first attempt
    snoozes = [e.meta["snoozes"] for e in app.client.job_events(job.id) if e.meta.get("reason") == "snoozed"]
    assert snoozes == list(range(1, 1001))
    app.close()


def test_past_its_most_snoozes_a_job_fails_for_good_and_a_delay_is_kept(url: str) -> None:
    app = App(url)

    @app.task(max_snoozes=2)
    def poll() -> None:
        raise Snooze(timedelta(0))

    @app.task
    def later() -> None:
        raise Snooze(timedelta(hours=1))

    job = poll.enqueue().job
    drain(app)
    failed = app.client.job(job.id)
    assert (failed.status, failed.error_code, failed.attempts) == (Status.FAILED, "SNOOZE_LIMIT", 1)
    waiting = later.enqueue().job
    before = app.store.now()
    drain(app)
    snoozed = app.client.job(waiting.id)
    assert (snoozed.status, snoozed.attempts) == (Status.QUEUED, 0)
    assert snoozed.run_at >= before + timedelta(minutes=59)
    with pytest.raises(ConfigError, match="Snooze takes a timedelta"):
        Snooze(timedelta(seconds=-1))
    with pytest.raises(ConfigError, match="max_snoozes"):
        app.task(max_snoozes=-1)(lambda: None)
    app.close()
