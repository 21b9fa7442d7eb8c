"""The testing kit for users' own tasks (``redrive.testing``): ``drain``
runs due jobs in the test's thread with the worker's own retry, stage and
dead-letter logic, moving a test clock past backoffs; ``assert_enqueued``
and ``enqueued_jobs`` say what was enqueued, and fail with a message that
shows what was."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

import redrive
from redrive import Actor, App, Fixed, Permanent, Stage, Status
from redrive.events import JobSucceeded
from redrive.store.memory import MemoryStore
from redrive.testing import Clock, assert_enqueued, count_jobs, drain, enqueued_jobs


@pytest.fixture(params=["memory", "sqlite"])
def clocked(request, tmp_path) -> Iterator[tuple[App, Clock]]:
    """An app on a store that reads a test clock."""
    clock = Clock()
    if request.param == "memory":
        app = App(store=MemoryStore(clock=clock))
    else:
        from redrive.store.sqlite.store import SQLiteStore

        store = SQLiteStore(str(tmp_path / "t.db"), clock=clock)
        store.migrate()
        app = App(store=store)
    yield app, clock
    app.close()


def test_drain_runs_retries_by_policy_moving_the_clock_past_each_backoff(clocked) -> None:
    app, clock = clocked
    calls: list[tuple[int, str]] = []

    @app.task(max_attempts=3, backoff=Fixed([timedelta(minutes=5)]))
    def send_welcome(user_id: int) -> None:
        calls.append((user_id, threading.current_thread().name))
        if len(calls) < 3:
            raise ConnectionError("the mail relay is down")

    job = send_welcome.enqueue(42).job
    began = clock()
    drained = drain(app, clock=clock)
    # Three attempts, in this thread, two backoffs of five minutes passed by the clock
    assert calls == [(42, threading.current_thread().name)] * 3
    assert (drained.retried, drained.succeeded, drained.failed) == (2, 1, 0)
    assert clock() - began >= timedelta(minutes=10)
    assert app.client.job(job.id).status is Status.SUCCEEDED


def test_without_a_clock_drain_runs_only_what_is_due(clocked) -> None:
    app, _ = clocked

    @app.task(max_attempts=2, backoff=Fixed([timedelta(hours=1)]))
    def flaky() -> None:
        raise ConnectionError("down")

    job = flaky.enqueue().job
    later = flaky.options(delay=timedelta(days=1)).enqueue().job
    drained = drain(app)
    assert (drained.retried, drained.failed) == (1, 0)
    waiting = app.client.job(job.id)  # its retry waits an hour of the store's clock
    assert waiting.status in (Status.QUEUED, Status.SCHEDULED) and waiting.attempts == 1
    assert waiting.run_at - waiting.created_at >= timedelta(minutes=59)
    assert app.client.job(later.id).attempts == 0


def test_a_job_out_of_attempts_is_dead_lettered_and_stages_keep_their_output(clocked) -> None:
    app, clock = clocked
    seen: list[dict] = []

    @app.task(stages=[Stage("fetch"), Stage("render", max_attempts=2)])
    async def report(doc: str) -> None:
        rows = await redrive.stage("fetch", lambda: {"rows": 3})
        seen.append(rows)
        await redrive.stage("render", _broken)

    job = report.enqueue("q3").job
    drained = drain(app, clock=clock)
    failed = app.client.job(job.id)
    assert (failed.status, failed.error_code, failed.stage) == (Status.FAILED, "PERMANENT", "render")
    assert failed.checkpoint == {"fetch": {"rows": 3}} and drained.failed == 1
    letters = app.admin(Actor.operator("test")).dead_letters(limit=5).items
    assert [letter.job_id for letter in letters] == [job.id]


def _broken() -> None:
    raise Permanent("the template is broken")


def test_assert_enqueued_finds_jobs_by_arguments_and_says_what_was_there_when_not(clocked) -> None:
    app, _ = clocked

    @app.task
    def send_welcome(user_id: int) -> None: ...

    send_welcome.enqueue(42)
    send_welcome.enqueue(7)
    assert [j.args for j in enqueued_jobs(app, send_welcome)] == [[42], [7]]
    (job,) = assert_enqueued(app, send_welcome, args=[42], count=1)
    assert job.task == "send_welcome"
    assert_enqueued(app, "send_welcome")
    with pytest.raises(AssertionError) as missing:
        assert_enqueued(app, send_welcome, args=[43])
    assert str(missing.value) == ("expected at least one send_welcome job(s) with args=[43], found 0; "
                                  "send_welcome jobs enqueued: 2 (args=[42] kwargs={} queue='default'; "
                                  "args=[7] kwargs={} queue='default')")
    with pytest.raises(AssertionError, match="expected 2 send_welcome"):
        assert_enqueued(app, send_welcome, args=[42], count=2)


def test_the_fixture_points_a_module_level_app_at_a_store_of_its_own_for_one_test(tmp_path, redrive_isolate) -> None:
    # Given an app made for a database, as a user's myapp/tasks.py makes it
    app = App(f"sqlite:///{tmp_path / 'real.db'}")
    real = app.store

    @app.task(max_attempts=3, backoff=Fixed([timedelta(minutes=1)]))
    def send_welcome(user_id: int) -> None:
        if redrive.current_job().attempts == 1:
            raise ConnectionError("down once")

    clock = redrive_isolate(app)
    send_welcome.enqueue(42)
    assert drain(app, clock=clock).succeeded == 1
    assert app.store is not real and sum(count_jobs(real).values()) == 0  # nothing reached the database


@pytest.mark.parametrize("where", ["sqlite", "postgres"])
def test_the_fixture_puts_each_test_on_a_fresh_real_database_when_asked(
        tmp_path, where, request, redrive_isolate) -> None:
    from redrive.testing import isolated

    database = "sqlite" if where == "sqlite" else request.getfixturevalue("pg_test_database")
    app = App(f"sqlite:///{tmp_path / 'real.db'}")
    calls: list[int] = []

    @app.task(max_attempts=2, backoff=Fixed([timedelta(minutes=5)]))
    def send_welcome(user_id: int) -> None:
        calls.append(user_id)
        if len(calls) == 1:
            raise ConnectionError("down once")

    # A first test leaves a job behind in the database (not drained)
    with isolated(app, database=database):
        send_welcome.enqueue(1)
        assert app.store.dialect == where
    # The next starts from an empty one, migrated, its store on a test clock
    clock = redrive_isolate(app, database=database)
    assert enqueued_jobs(app, send_welcome) == []
    send_welcome.enqueue(42)
    drained = drain(app, clock=clock)
    assert (drained.retried, drained.succeeded, calls) == (1, 1, [42, 42])
    assert not (tmp_path / "real.db").exists()  # the app's own database was never opened


def test_a_database_that_is_not_a_test_database_is_never_emptied(pg_url: str) -> None:
    from redrive.testing import isolated

    app = App(pg_url)  # redrive_t_...: no "test" in its name
    app.task(lambda: None, name="t")
    app.enqueue("t")
    with pytest.raises(redrive.ConfigError, match="does not look like a test database"), isolated(app, database="app"):
        pass
    assert sum(count_jobs(app.store).values()) == 1
    with pytest.raises(redrive.ConfigError, match="memory, sqlite, app or a sqlite:/// or postgresql:// URL"), \
            isolated(app, database="mysql://x/test"):
        pass
    app.close()


def test_drain_until_moves_the_clock_that_far_and_queue_picks_one_queue(clocked) -> None:
    app, clock = clocked
    ran: list[str] = []

    @app.task(queue="email", max_attempts=3, backoff=Fixed([timedelta(hours=2)]))
    def remind(who: str) -> None:
        ran.append(who)
        if ran.count(who) == 1:
            raise ConnectionError("relay down")  # retried two hours later

    @app.task(queue="reports")
    def report(day: str) -> None:
        ran.append(day)

    remind.enqueue("ada")
    report.enqueue("monday")
    # Only the email queue, and the clock moves at most one hour: the retry, due in two, waits
    first = drain(app, queue="email", clock=clock, until=timedelta(hours=1))
    assert (first.retried, first.succeeded, ran) == (1, 0, ["ada"])
    (waiting,) = enqueued_jobs(app, remind)
    assert waiting.run_at - clock() > timedelta(minutes=59)  # still waiting for its backoff
    # Up to three hours from now: the retry runs; the other queue still waits
    second = drain(app, queue="email", clock=clock, until=clock() + timedelta(hours=3))
    assert (second.succeeded, ran) == (1, ["ada", "ada"])
    assert enqueued_jobs(app, report)[0].status == Status.QUEUED
    with pytest.raises(redrive.ConfigError, match="not both"):
        drain(app, queue="email", queues=["reports"])
    with pytest.raises(redrive.ConfigError, match="give clock= too"):
        drain(app, until=timedelta(hours=1))


def test_a_task_alone_stands_for_its_app(clocked) -> None:
    app, _ = clocked

    @app.task
    def send_welcome(user_id: int) -> None: ...

    send_welcome.enqueue(42)
    assert [j.args for j in assert_enqueued(send_welcome, args=[42], count=1)] == [[42]]
    assert [j.args for j in enqueued_jobs(send_welcome)] == [[42]]
    with pytest.raises(AssertionError, match="expected 1 send_welcome job"):
        assert_enqueued(send_welcome, args=[7], count=1)
    with pytest.raises(redrive.ConfigError, match="needs the task"):
        assert_enqueued(app)


def test_drain_records_how_long_each_job_waited_as_a_worker_does(clocked) -> None:
    """The charts' queue wait comes from each ending's ``wait_ms``: a job
    drained 90 s after it was due waited 90 s, in its event and its announcement."""
    app, clock = clocked
    announced: list[float] = []
    app.events.subscribe(lambda event: announced.append(event.wait_s), names=[JobSucceeded])

    @app.task
    def ping() -> None:
        pass

    job = ping.enqueue().job
    clock.advance(timedelta(seconds=90))
    assert drain(app).succeeded == 1
    ending = app.store.job_events_list(job_id=job.id)[-1]
    assert ending.to_status is Status.SUCCEEDED and 89_000 <= ending.meta["wait_ms"] <= 91_000
    assert len(announced) == 1 and 89 <= announced[0] <= 91



def test_isolated_on_postgresql_leaves_no_connection_pool_open(pg_test_database: str, monkeypatch) -> None:
    # A pool dropped without close() while its thread still makes its first
    # connection is finalised on that thread, which cannot join itself (pytest
    # then fails whichever test is running); until then it keeps a connection.
    from psycopg_pool import ConnectionPool

    from redrive.store.postgres import connection as postgres_store  # (where the store makes its pools)
    from redrive.testing import isolated

    made: list[ConnectionPool] = []

    class Kept(ConnectionPool):  # each pool the store makes, kept to be looked at after
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(postgres_store, "ConnectionPool", Kept)
    app = App("memory://")
    app.task(lambda: None, name="t")
    with isolated(app, database=pg_test_database):
        app.enqueue("t")
        assert app.store.dialect == "postgres"
    assert len(made) >= 2  # the migration's store and the block's
    assert [pool.name for pool in made if not pool.closed] == []
    app.close()
