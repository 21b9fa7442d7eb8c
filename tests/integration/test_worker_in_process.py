"""A worker in this process over the memory store: how each ending of a handler is recorded."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from redrive import (
    Actor,
    App,
    Classifier,
    FullJitter,
    JobRequest,
    MemoryStore,
    Permanent,
    Status,
    Transient,
    Worker,
    current_job,
)
from redrive.core.transitions import Requeue
from redrive.testing import count_jobs, wait_for_async

FAST = FullJitter(initial=timedelta(milliseconds=10), cap=timedelta(milliseconds=50))


@pytest.fixture
def app() -> App:
    app = App(store=MemoryStore())

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    async def whoami() -> dict:
        job = current_job()
        return {"id": str(job.id), "attempt": job.attempts}

    @app.task(max_attempts=3, backoff=FAST)
    async def flaky(succeed_on: int) -> str:
        if current_job().attempts < succeed_on:
            raise Transient("upstream 503", code="UPSTREAM_5XX", retry_after=timedelta(milliseconds=1))
        return "ok"

    @app.task
    def rejected() -> None:
        raise Permanent("Only PDF files are supported.", code="NOT_PDF")

    @app.task
    def buggy() -> None:
        raise KeyError("missing")

    @app.task
    def unserialisable() -> object:
        return object()

    return app


def _finished(app: App, job_ids: list):
    return lambda: all(app.client.job(i).status in (Status.SUCCEEDED, Status.FAILED) for i in job_ids)


async def _run_until(app: App, condition, **options) -> None:
    worker = Worker(app.client, **{"poll_interval": timedelta(milliseconds=20),
                            "shutdown_grace": timedelta(seconds=2), **options})
    running = asyncio.create_task(worker.run())
    try:
        # Woken by each event, so it returns as soon as the condition holds; the
        # bound only stops a hung test. None of these tests times the product (a
        # loaded machine took 5 s for the fault proxy's 18 jobs, one waiting out a
        # Retry-After of 1 s), and those that do say so with figures of their own.
        await wait_for_async(condition, events=app.events, timeout=60, what="the worker getting there")
    finally:
        worker.stop()
        await asyncio.wait_for(running, 10)


def test_each_ending_becomes_one_recorded_outcome(app: App) -> None:
    ids = {
        name: app.enqueue(name, args=args).job.id
        for name, args in [("add", [2, 3]), ("whoami", []), ("rejected", []),
                           ("buggy", []), ("unserialisable", [])]
    }
    ids["flaky_ok"] = app.enqueue("flaky", args=[2]).job.id
    ids["flaky_never"] = app.enqueue("flaky", args=[9]).job.id
    asyncio.run(_run_until(app, _finished(app, list(ids.values()))))

    assert app.client.job(ids["add"]).result == 5
    assert app.client.job(ids["whoami"]).result == {"id": str(ids["whoami"]), "attempt": 1}
    ok = app.client.job(ids["flaky_ok"])
    assert (ok.status, ok.attempts, ok.last_error_code) == (Status.SUCCEEDED, 2, "UPSTREAM_5XX")
    never = app.client.job(ids["flaky_never"])
    assert (never.status, never.attempts, never.error_code) == (Status.FAILED, 3, "UPSTREAM_5XX")
    rejected = app.client.job(ids["rejected"])
    assert (rejected.error_code, rejected.error_message, rejected.attempts) == (
        "NOT_PDF", "Only PDF files are supported.", 1)
    buggy = app.client.job(ids["buggy"])
    assert (buggy.error_code, buggy.error_message) == ("BUG", "KeyError: 'missing'")
    assert app.client.job(ids["unserialisable"]).error_code == "RESULT_NOT_JSON"
    durations = [e.meta.get("duration_ms") for e in app.client.job_events(ids["add"])]
    assert isinstance(durations[-1], int)


def test_a_job_of_a_task_this_worker_lacks_is_retried_not_lost(app: App) -> None:
    other = App(store=app.store)
    other.task(lambda: None, name="elsewhere")
    job = other.enqueue("elsewhere").job
    asyncio.run(_run_until(app, lambda: app.client.job(job.id).last_error_code))
    seen = app.client.job(job.id)
    assert seen.status is Status.QUEUED and seen.last_error_code == "UNKNOWN_TASK"


def test_a_handler_that_loses_its_lease_has_its_result_dropped(app: App) -> None:
    store = app.store
    runs = []
    lost: list[str] = []
    app.events.subscribe(lambda e: lost.append(e.data["lease_token"]), names=["job.lease_lost"])

    @app.task
    async def contested() -> str:
        runs.append(current_job().lease_token)
        if len(runs) == 1:
            # While this run is in flight, its lease is taken away (as a
            # reclaim by another worker would); what it returns must not land.
            store.jobs_finish([Requeue(current_job().lease)])
            return "stale"
        return "fresh"

    job = app.enqueue("contested").job
    asyncio.run(_run_until(app, _finished(app, [job.id])))
    assert app.client.job(job.id).result == "fresh"
    assert len(runs) == 2 and runs[0] != runs[1]
    assert [e.to_status for e in app.client.job_events(job.id)].count(Status.SUCCEEDED) == 1
    assert lost == [str(runs[0])]  # the stale run, and only it, was told lost


def test_a_job_back_at_the_same_worker_while_its_old_run_goes_on_is_tracked_per_run(app: App) -> None:
    """A run paused past its lease can still be going when its job comes back
    to the same worker: the old run's end must not make the worker forget the
    new one, which would then get no heartbeat and no requeue on shutdown."""
    store = app.store
    second_started, second_may_end = threading.Event(), threading.Event()
    runs = []

    @app.task
    def comeback() -> None:
        runs.append(current_job().lease_token)
        if len(runs) == 1:
            store.jobs_finish([Requeue(current_job().lease)])  # as a reclaim after a pause would
            assert second_started.wait(5)  # this worker claims the job again meanwhile
            return
        second_started.set()
        second_may_end.wait(10)

    lost: list[str] = []
    app.events.subscribe(lambda e: lost.append(e.data["lease_token"]), names=["job.lease_lost"])
    job = app.enqueue("comeback").job
    try:
        # Given the first run ended (its outcome dropped) while the second goes on,
        # when the worker stops with a short grace,
        asyncio.run(_run_until(app, lambda: lost,
                               shutdown_grace=timedelta(milliseconds=200)))
    finally:
        second_may_end.set()
    # then the second run was still tracked: it was requeued, not left running.
    assert len(runs) == 2 and runs[0] != runs[1]
    requeued = app.client.job(job.id)
    assert requeued.status is Status.QUEUED and requeued.lease_token is None
    assert app.client.job_events(job.id)[-1].meta.get("reason") == "shutdown"


class _SlowWrites(MemoryStore):
    """Outcome writes wait until the test lets them through."""

    def __init__(self) -> None:
        super().__init__()
        self.writes_open = threading.Event()

    def jobs_finish(self, items):
        self.writes_open.wait(10)
        return super().jobs_finish(items)


def test_concurrency_bounds_handlers_and_a_slow_store_bounds_the_leases_held() -> None:
    """A slot frees when its handler returns, so claims overlap outcome writes;
    while writes are stuck, at most twice ``concurrency`` leases are held."""
    store = _SlowWrites()
    app = App(store=store)
    now = {"running": 0, "most": 0}
    lock = threading.Lock()

    @app.task
    def work() -> None:
        with lock:
            now["running"] += 1
            now["most"] = max(now["most"], now["running"])
        time.sleep(0.01)
        with lock:
            now["running"] -= 1

    ids = [r.job.id for r in app.enqueue_many([JobRequest("work")] * 30)]

    async def scenario() -> None:
        worker = Worker(app.client, concurrency=4, poll_interval=timedelta(milliseconds=20),
                        shutdown_grace=timedelta(seconds=2))
        running = asyncio.create_task(worker.run())
        try:
            await wait_for_async(lambda: count_jobs(store).get(Status.RUNNING, 0) >= 8, events=app.events,
                                 timeout=3, what="eight jobs running")
            await asyncio.sleep(0.2)  # a window, not a wait: time enough to claim more, were it allowed
            assert count_jobs(store)[Status.RUNNING] == 8
            store.writes_open.set()
            await wait_for_async(_finished(app, ids), events=app.events, timeout=5, what="every job finished")
        finally:
            worker.stop()
            await asyncio.wait_for(running, 10)

    asyncio.run(scenario())
    assert all(app.client.job(i).status is Status.SUCCEEDED for i in ids)
    assert now["most"] == 4


class _StuckListener(MemoryStore):
    """Stopping its wake-up listener takes seconds, as PostgreSQL's does when
    a partition left the listening thread in a connect."""

    def __init__(self) -> None:
        super().__init__()
        self.unsubscribed = threading.Event()

    def wakeups_subscribe(self, on_wake):
        stop = super().wakeups_subscribe(on_wake)

        def unsubscribe() -> None:
            time.sleep(3)
            stop()
            self.unsubscribed.set()

        return unsubscribe


def test_a_stopping_worker_does_not_wait_for_its_wake_up_listener() -> None:
    """Claims are over once a worker stops, and so is any use for wake-ups:
    its time to stop is not spent waiting for the listener to go."""
    store = _StuckListener()
    app = App(store=store)

    async def scenario() -> float:
        worker = Worker(app.client, poll_interval=timedelta(milliseconds=20), shutdown_grace=timedelta(0))
        running = asyncio.create_task(worker.run())
        await wait_for_async(lambda: bool(store.workers_list()), events=app.events, timeout=3,
                             what="the worker registered")
        asked = time.monotonic()
        worker.stop()
        await asyncio.wait_for(running, 10)
        return time.monotonic() - asked

    took = asyncio.run(scenario())
    assert took < 1.5, took
    assert store.unsubscribed.wait(5)  # the listener was stopped all the same, on its own thread


def test_a_worker_with_a_retention_prunes_old_history_and_keeps_the_rest() -> None:
    now = [datetime.now(UTC)]
    app = App(store=MemoryStore(clock=lambda: now[0]))
    app.task(lambda: None, name="noop")
    old = [app.enqueue("noop").job.id for _ in range(3)]
    asyncio.run(_run_until(app, _finished(app, old)))
    # Given the old jobs finished a day ago, and a fresh one finished now
    now[0] += timedelta(days=1)
    fresh = app.enqueue("noop").job.id
    asyncio.run(_run_until(app, _finished(app, [fresh])))
    waiting = app.enqueue("noop", delay=timedelta(hours=5)).job.id
    # When a worker with a retention of an hour runs
    gone = lambda: all(app.store.job_get(job_id=i) is None for i in old)
    assert not gone()
    asyncio.run(_run_until(app, gone, retention=timedelta(hours=1)))
    # Then only the old history went
    assert app.client.job(fresh).status is Status.SUCCEEDED
    assert app.client.job(waiting).status is Status.SCHEDULED


class _BrokenClassifier(Classifier):
    def exception(self, exc, *, now):
        raise RuntimeError("classifier bug")


def test_a_classifier_that_raises_does_not_lose_the_job(app: App, caplog) -> None:
    @app.task(classifier=_BrokenClassifier())
    def fragile() -> None:
        raise ValueError("bad input")

    job_id = app.enqueue("fragile").job.id
    asyncio.run(_run_until(app, _finished(app, [job_id])))
    failed = app.client.job(job_id)
    assert (failed.status, failed.error_code, failed.error_message) == (
        Status.FAILED, "BUG", "ValueError: bad input")
    assert "the classifier raised" in caplog.text


def _deep_helper() -> None:
    raise KeyError("missing")


def test_a_dead_letter_keeps_the_task_s_frames_with_project_paths() -> None:
    app = App(store=MemoryStore())

    @app.task
    def broken() -> None:
        _deep_helper()

    job = app.enqueue(broken).job
    asyncio.run(_run_until(app, _finished(app, [job.id])))
    (letter,) = app.admin(Actor.operator("test")).dead_letters()
    stack = letter.last_stack
    assert 'File "tests/integration/test_worker_in_process.py"' in stack
    assert "in broken" in stack and "in _deep_helper" in stack and "KeyError: 'missing'" in stack
    assert "redrive/runtime" not in stack and "asyncio" not in stack
    assert str(Path(__file__).resolve().parents[2]) not in stack  # no absolute path of the server


def test_a_secret_in_a_long_error_message_is_stored_nowhere(tmp_path: Path) -> None:
    # Given a task whose error message holds a private key, longer than a stored message
    app = App(store=MemoryStore())
    key_body = "MIIEpAIBAAKCAQEA" * 80

    @app.task(max_attempts=1)
    def sign() -> None:
        raise ValueError(f"cannot sign with -----BEGIN RSA PRIVATE KEY-----\n{key_body}\n"
                         "-----END RSA PRIVATE KEY----- (password=hunter2)")

    job = sign.enqueue().job
    asyncio.run(_run_until(app, lambda: app.client.job(job.id).status is Status.FAILED))
    # Then neither the job, its dead letter, nor its stack keep any of it
    failed = app.client.job(job.id)
    letter = app.admin(Actor.operator("ops")).dead_letters().items[0]
    for text in (failed.error_message, failed.last_error_message, letter.error_message, letter.last_stack):
        assert "MIIEpAIBAAKCAQEA" not in (text or "") and "hunter2" not in (text or "")
    assert "[PEM]" in failed.error_message


class _LosesOneReply(MemoryStore):
    """Commits an outcome, then loses the reply, once: as a connection dropped after COMMIT."""

    lost = False

    def jobs_finish(self, items):  # type: ignore[no-untyped-def]
        written = super().jobs_finish(items)
        if not self.lost:
            self.lost = True
            from redrive import StoreUnavailable

            raise StoreUnavailable("server closed the connection unexpectedly")
        return written


def test_an_outcome_whose_reply_was_lost_is_found_written_not_called_lost(caplog) -> None:
    store = _LosesOneReply()
    app = App(store=store)

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    seen: list[str] = []
    app.events.subscribe(lambda e: seen.append(e.name), names=["job.succeeded", "job.lease_lost"])
    job = add.enqueue(2, 3).job
    with caplog.at_level("INFO", logger="redrive.worker"):
        asyncio.run(_run_until(app, lambda: seen == ["job.succeeded"]))
    assert store.lost and app.client.job(job.id).result == 5
    assert "lost the lease" not in caplog.text
    assert "was written before the connection was lost" in caplog.text
