"""Stopping a running job, on both stores with a real worker: a cancel asked
by an operator (an async task is cancelled where it awaits, a sync one polls
``redrive.cancelled()``), and time limits per task and per stage (an async
run is cancelled, a sync one abandoned with its slot freed and its late
result fenced out)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

import redrive
from redrive import Actor, App, Fixed, Settings, Stage, Status, Worker
from redrive.testing import wait_for

QUICK_RETRY = Fixed([timedelta(milliseconds=100)])


@contextmanager
def worker_running(app: App, **options: Any) -> Iterator[Worker]:
    """A worker on its own thread and event loop, stopped at the end."""
    worker = Worker(app.client, **{"poll_interval": timedelta(milliseconds=50),
                                   "shutdown_grace": timedelta(seconds=1), **options})
    thread = threading.Thread(target=asyncio.run, args=(worker.run(),), daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(20)
        assert not thread.is_alive(), "the worker did not stop"


@pytest.fixture
def app(db_url: str) -> Iterator[App]:
    app = App(db_url)
    app.client.store.migrate()
    yield app
    app.close()


def _events(app: App, names: list[str]) -> list[redrive.events.Event]:
    seen: list[Any] = []
    app.events.subscribe(seen.append, names=names)
    return seen


def _history(app: App, job_id: Any) -> list[Any]:
    return app.admin(Actor.operator("test")).job_events(job_id)


def _ends_cancelled_within_a_second(app: App, job_id: Any, by: str) -> None:
    asked = time.monotonic()
    assert app.admin(Actor.operator(by)).cancel(job_id).status is Status.RUNNING  # its worker will stop it
    wait_for(lambda: app.client.job(job_id).status is Status.CANCELLED, timeout=5, every=0.01)
    assert time.monotonic() - asked < 1.0
    last = _history(app, job_id)[-1]
    assert (last.from_status, last.to_status, last.meta["by"]) == (Status.RUNNING, Status.CANCELLED, by)


def test_a_running_async_job_is_cancelled_where_it_awaits(app: App) -> None:
    started, cleaned_up = threading.Event(), threading.Event()

    @app.task
    async def crawl() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned_up.set()  # the task's own finally blocks run

    told = _events(app, ["job.cancel_requested", "job.cancelled"])
    with worker_running(app):
        job = crawl.enqueue().job
        assert started.wait(10)
        _ends_cancelled_within_a_second(app, job.id, by="ops:ana")
        assert cleaned_up.is_set()
        wait_for(lambda: len(told) == 2)
    assert [(e.name, e.data["by"]) for e in told] == [("job.cancel_requested", "ops:ana"), ("job.cancelled", "ops:ana")]


def test_a_running_sync_job_that_polls_cancelled_ends_cancelled(app: App) -> None:
    started = threading.Event()
    pages: list[int] = []

    @app.task
    def convert() -> None:
        started.set()
        for page in range(100_000):
            if redrive.cancelled():
                raise redrive.Cancelled(f"stopped before page {page}")
            pages.append(page)
            time.sleep(0.01)

    with worker_running(app):
        job = convert.enqueue().job
        assert started.wait(10)
        _ends_cancelled_within_a_second(app, job.id, by="ops:bo")
    last = _history(app, job.id)[-1]
    assert last.meta["reason"] == f"stopped before page {len(pages)}"
    assert app.client.job(job.id).attempts == 1  # stopped, not retried


def test_a_sync_job_that_ignores_its_cancel_runs_to_its_time_limit_and_its_late_result_is_refused(app: App) -> None:
    started, release, returned = threading.Event(), threading.Event(), threading.Event()

    @app.task(timeout=timedelta(seconds=2))
    def stubborn() -> str:
        started.set()
        release.wait(60)  # never looks at redrive.cancelled()
        returned.set()
        return "late"

    with worker_running(app):
        job = stubborn.enqueue().job
        assert started.wait(10)
        began = time.monotonic()
        app.admin(Actor.operator("ops:ana")).cancel(job.id)
        time.sleep(1.0)  # a window, not a wait: a task that ignores the cancel keeps running through it
        assert app.client.job(job.id).status is Status.RUNNING  # it did not stop itself
        # At its time limit the worker gives up on it: the job ends as asked
        wait_for(lambda: app.client.job(job.id).status is Status.CANCELLED, timeout=5, every=0.02)
        assert 1.5 < time.monotonic() - began < 3.5
        history = _history(app, job.id)
        # When the abandoned thread finally returns
        release.set()
        assert returned.wait(5)
        time.sleep(0.3)  # a window, not a wait: what the worker would wrongly do with the late result
    # Then its result changes nothing
    ended = app.client.job(job.id)
    assert ended.status is Status.CANCELLED and ended.result is None
    assert _history(app, job.id) == history


def test_a_sync_task_past_its_timeout_frees_its_slot_fails_timeout_and_retries(app: App) -> None:
    release = threading.Event()
    calls: list[int] = []

    @app.task(timeout=timedelta(seconds=1), max_attempts=3, backoff=QUICK_RETRY)
    def hang() -> str:
        calls.append(redrive.current_job().attempts)
        if len(calls) == 1:
            release.wait(3600)  # as good as sleep(3600), but the test can end it
            return "from the abandoned thread"
        return "second attempt"

    @app.task
    def quick() -> str:
        return "ran"

    with worker_running(app, concurrency=1):
        hung = hang.enqueue().job
        wait_for(lambda: calls == [1])
        began = time.monotonic()
        other = quick.enqueue().job
        # The one slot is free again once the limit passes: the next job runs
        wait_for(lambda: app.client.job(other.id).status is Status.SUCCEEDED, timeout=5, every=0.02)
        assert time.monotonic() - began < 1.5
        # The attempt failed TIMEOUT, retryable, and the retry ran by the task's policy
        wait_for(lambda: app.client.job(hung.id).status is Status.SUCCEEDED, timeout=5)
        history = _history(app, hung.id)
        timed_out = [e for e in history if e.meta.get("error_code") == "TIMEOUT"]
        assert [(e.from_status, e.to_status) for e in timed_out] == [(Status.RUNNING, Status.QUEUED)]
        assert app.client.job(hung.id).last_error_message == "task hang ran past its time limit of 1s"
        # When the orphaned thread returns at last
        release.set()
        time.sleep(0.3)  # a window, not a wait: what the worker would wrongly do with the late result
    # Then nothing changes: the job keeps the second attempt's result
    assert app.client.job(hung.id).result == "second attempt"
    assert _history(app, hung.id) == history


def test_an_async_stage_past_its_own_limit_fails_timeout_in_that_stage(app: App) -> None:
    @app.task(stages=[Stage("fetch"), Stage("render", max_attempts=1, timeout=timedelta(milliseconds=300))])
    async def report() -> None:
        await redrive.stage("fetch", lambda: {"rows": 3})
        await redrive.stage("render", asyncio.sleep, 3600)

    with worker_running(app):
        job = report.enqueue().job
        wait_for(lambda: app.client.job(job.id).status is Status.FAILED, timeout=10)
    failed = app.client.job(job.id)
    assert (failed.error_code, failed.stage) == ("TIMEOUT", "render")
    assert failed.error_message == "stage render ran past its time limit of 0.3s"
    assert failed.checkpoint == {"fetch": {"rows": 3}}  # the stage before it kept its output
    letter = app.admin(Actor.operator("ops")).dead_letters(limit=1).items[0]
    # The stack shows where the task was when its time ran out
    assert 'await redrive.stage("render", asyncio.sleep, 3600)' in (letter.last_stack or "")


def test_a_timeout_must_be_a_positive_timedelta(app: App) -> None:
    with pytest.raises(redrive.ConfigError, match="timeout must be a timedelta longer than zero"):
        app.task(timeout=timedelta(0))(lambda: None)
    with pytest.raises(redrive.ConfigError, match="stage 'x': timeout"):
        Stage("x", timeout=5)  # type: ignore[arg-type]


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_abandoned_sync_runs_are_counted_and_past_the_cap_no_sync_job_starts(
        db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    app = App(db_url, settings=Settings.load(worker_max_orphans=2))
    app.client.store.migrate()
    release = threading.Event()

    @app.task(hard_timeout=timedelta(milliseconds=300), max_attempts=1)
    def spin() -> None:
        release.wait(3600)  # a run nothing can stop (the test ends it)

    @app.task
    async def still_runs() -> str:
        return "async"

    try:
        with worker_running(app, concurrency=4) as worker:
            # Given two sync runs abandoned at their limit (alone, a hard limit abandons as a soft one does)
            stuck = [spin.enqueue().job.id for _ in range(2)]
            wait_for(lambda: all(app.client.job(j).status is Status.FAILED for j in stuck), timeout=10)
            assert {app.client.job(j).error_code for j in stuck} == {"TIMEOUT"}
            # Then the worker counts them, says so once each, and shows them in the registry
            wait_for(lambda: worker._threads.orphaned == 2, timeout=5)
            orphaned = [r for r in caplog.records if "runs on, abandoned" in r.getMessage()]
            assert len(orphaned) == 2 and all(str(j) in " ".join(r.getMessage() for r in orphaned) for j in stuck)
            wait_for(lambda: [w.orphaned for w in app.admin(Actor.operator("t")).workers()[0]] == [2], timeout=15)
            # And past the cap no sync job starts here (it stays queued, no attempt spent), while async ones do
            blocked = spin.enqueue().job.id
            other = still_runs.enqueue().job.id
            wait_for(lambda: app.client.job(other).status is Status.SUCCEEDED, timeout=5)
            time.sleep(0.5)
            assert app.client.job(blocked).status in (Status.QUEUED, Status.SCHEDULED)
            assert app.client.job(blocked).attempts == 0
            assert sum("starts no sync job" in r.getMessage() for r in caplog.records) == 1
            # When the orphaned threads return, sync jobs start again
            release.set()
            wait_for(lambda: app.client.job(blocked).status is Status.SUCCEEDED, timeout=10)
    finally:
        release.set()
        app.close()
