"""Testing your own tasks without a worker process: run what is due in the
test's thread (``drain``), and ask what was enqueued (``enqueued_jobs``,
``assert_enqueued``). ``docs/testing-your-tasks.md`` shows them in use.

``drain`` runs each job through the worker's own execution and writes its
ending through the store's own transition, so retries follow the task's
policy, stages keep their checkpoints and a job out of attempts gets its
dead letter, as under ``redrive worker``. A sync task runs in the test's
own thread (its database connection and transaction, Django's included)
with no event loop running there, as in a worker's task thread. What it
does not do: run two jobs at once, hold a lease against other workers (it
takes a long one), or stop a sync run at its time limit (it runs to its end).
"""

from __future__ import annotations

import asyncio
import os
import queue
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from random import Random
from typing import Any

from redrive.app import App
from redrive.core.job import Job
from redrive.core.states import Status
from redrive.core.transitions import Finished, finish_of
from redrive.declarations import Task
from redrive.errors import ConfigError
from redrive.runtime.completer import announce
from redrive.runtime.executor import execute
from redrive.runtime.interrupts import Interrupt, Limit
from redrive.runtime.running import queue_wait
from redrive.store.memory import MemoryStore
from redrive.store.sqlite.store import SQLiteStore

_LEASE = timedelta(minutes=10)  # no heartbeat in a drain: long enough for any test's job
_WORKER = "redrive.testing.drain"


@contextmanager
def isolated(app: App, *, clock: Any = None, database: str = "memory") -> Iterator[Any]:
    """Within the block, ``app`` enqueues to and reads from a fresh store
    that reads ``clock`` (a new ``redrive.testing.Clock`` when none is
    given, yielded); after it, the app is as it was. ``database``:

    - ``"memory"`` (the default): a store in memory, whatever database the
      app was made for: your tasks tested without a database;
    - ``"sqlite"``: a new SQLite file, removed after;
    - ``"app"``: the app's own database, emptied of redrive's rows first
      (a Django test database, where ``enqueue(conn=connection)`` joins
      the test's transactions);
    - a ``postgresql://`` or ``sqlite:///`` URL: that test database,
      migrated and emptied first.

    A database that is emptied must be a test database: its name must
    contain "test", or it is refused."""
    from redrive.testing import Clock

    clock = clock or Clock()
    saved = app._store, app._client
    with ExitStack() as cleanup:
        app._store, app._client = _fresh_store(app, database, clock, cleanup), None
        try:
            yield clock
        finally:
            app.close()
            app._store, app._client = saved


def _fresh_store(app: App, database: str, clock: Any, cleanup: ExitStack) -> Any:
    if database == "memory":
        return MemoryStore(clock=clock)
    if database == "sqlite":
        folder = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="redrive-test-"))
        return SQLiteStore(os.path.join(folder, "redrive.db"), clock=clock)
    url = app.settings.database_url if database == "app" else database
    scheme = url.split("://", 1)[0].lower()
    if scheme not in ("sqlite", "postgresql", "postgres"):
        raise ConfigError(f"isolated(database=...) is memory, sqlite, app or a sqlite:/// or postgresql:// "
                          f"URL, not {database!r}")
    name = url.rsplit("/", 1)[-1].split("?", 1)[0]
    if "test" not in name.lower():
        raise ConfigError(f"isolated empties the database it uses, and {name!r} does not look like a test "
                          "database: its name must contain 'test'")
    if scheme == "sqlite":
        store: Any = SQLiteStore(url[len("sqlite:///"):], clock=clock)
    else:
        from redrive.store.postgres.store import PostgresStore

        with closing(PostgresStore(url, check_schema=False)) as migrating:  # its pool too, not left to the GC
            migrating.migrate()
        store = PostgresStore(url, clock=clock)
    store_empty(store)
    return store


def store_empty(store: Any) -> None:
    """Every row of redrive's tables gone, their schema kept: a test's fresh start."""
    if store.dialect == "postgres":
        import psycopg

        with psycopg.connect(store.url, autocommit=True) as conn:
            tables = [name for (name,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                " AND tablename LIKE 'redrive\\_%' AND tablename <> 'redrive_migration'")]
            if tables:
                conn.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables))
        return
    with closing(sqlite3.connect(store.path, timeout=30)) as lite, lite:
        tables = [name for (name,) in lite.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'redrive\\_%' ESCAPE '\\'"
            " AND name <> 'redrive_migration'")]
        for table in tables:
            lite.execute(f'DELETE FROM "{table}"')


@dataclass
class Drained:
    """What a ``drain`` ran: each attempt's ending, in order, by job status after it."""

    endings: list[Finished] = field(default_factory=list)

    def count(self, status: Status | str) -> int:
        return sum(1 for done in self.endings if done.status == Status(status))

    @property
    def succeeded(self) -> int:
        return self.count(Status.SUCCEEDED)

    @property
    def failed(self) -> int:
        return self.count(Status.FAILED)

    @property
    def retried(self) -> int:
        """Attempts that failed and were put back for another."""
        return sum(1 for done in self.endings if done.status in (Status.SCHEDULED, Status.QUEUED))


class _InTheTestsThread:
    """Where a drain runs sync task code: the thread that called ``drain``,
    with no event loop running in it, as a worker's task threads have none
    (Django's ORM refuses to run in a thread that has one), while the
    drain's own loop runs beside it. A drain's sync run is not stopped at
    its time limit: it runs to its end, as it would have in the test."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()

    async def run(self, fn: Callable[[], Any], *, what: str = "a call", key: Hashable = None) -> Any:
        future: Future[Any] = Future()
        self._calls.put((future, fn))
        return await asyncio.wrap_future(future)

    def serve(self) -> None:
        """Run what the drain hands over, in this thread, until it is done."""
        while (call := self._calls.get()) is not None:
            future, fn = call
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # the run's ending, told to the executor
                future.set_exception(exc)
            del future, fn, call

    def done(self) -> None:
        self._calls.put(None)


class _Unlimited(Interrupt):
    """A sync run's stop signals in a drain: its time limits are not armed
    (the test's thread cannot be stopped, so the run ends as it ends)."""

    __slots__ = ()

    def limit(self, seconds: float, what: str) -> Limit:
        return Limit(0.0, seconds, what)


def drain(app: App, *, queues: Sequence[str] | None = None, queue: str | None = None, clock: Any = None,
          until: datetime | timedelta | None = None, max_attempts: int = 10_000) -> Drained:
    """Run ``app``'s due jobs (of ``queues``, or of the one ``queue``;
    default every queue), one at a time, until none is due: a sync task in
    this thread (with no event loop running in it, as in a worker's task
    thread), an async one on the drain's own event loop. With ``clock``
    (the ``redrive.testing.Clock`` the app's store reads), a job waiting for
    a backoff or a ``delay`` is made due by moving the clock to it, so the
    drain goes on until no job is left to run; ``until`` (a time, or a
    duration from the clock's time now) is as far as the clock moves, and a
    job due later is left waiting. At most ``max_attempts`` attempts (a task
    that retries for ever does not hang the test)."""
    if queue is not None:
        if queues is not None:
            raise ConfigError("drain takes queues=[...] or queue=..., not both")
        queues = [queue]
    if until is not None and clock is None:
        raise ConfigError("drain(until=...) moves the test clock: give clock= too")
    limit = clock() + until if isinstance(until, timedelta) else until
    here = _InTheTestsThread()
    drained: Future[Drained] = Future()

    def loop() -> None:
        try:
            drained.set_result(asyncio.run(_drain(app, queues, clock, limit, max_attempts, here)))
        except BaseException as exc:  # raised in the test's thread below
            drained.set_exception(exc)
        finally:
            here.done()

    beside = threading.Thread(target=loop, name="redrive-drain", daemon=True)
    beside.start()
    here.serve()
    beside.join()
    return drained.result()


async def _drain(app: App, queues: Sequence[str] | None, clock: Any, until: datetime | None,
                 max_attempts: int, here: _InTheTestsThread) -> Drained:
    drained = Drained()
    rng = Random()
    store = app.store
    loop = asyncio.get_running_loop()
    names = list(queues) if queues is not None else _queues(app)
    while len(drained.endings) < max_attempts:
        claimed = store.jobs_claim(queues=names, limit=1, worker_id=_WORKER, lease_ttl=_LEASE) if names else []
        if not claimed:
            # the queues are read again only when nothing is due: a job may have made a queue of its own
            if queues is None and (fresh := _queues(app)) != names:
                names = fresh
                continue
            if clock is None or not _move_to_next(app, clock, names, until):
                return drained
            continue
        job = claimed[0]
        task = app.registry.tasks.get(job.task)
        wait_s = queue_wait(job, _LEASE)  # the charts count a drained job's wait as a worker's
        started = time.perf_counter()
        interrupt = Interrupt(loop) if task is None or task.is_async else _Unlimited(loop)
        execution = await execute(task, job, classifier=app.registry.classifier,
                                  threads=here, rng=rng, store=store,  # type: ignore[arg-type]
                                  interrupt=interrupt, events=app.events, spawner=app.client.plan_workflow)
        duration_s = time.perf_counter() - started
        for done in store.jobs_finish([finish_of(job.lease, execution, round(duration_s * 1000), round(wait_s * 1000))]):
            drained.endings.append(done)
            announce(app.events, done, duration_s=duration_s, wait_s=wait_s)
    return drained


def _queues(app: App) -> list[str]:
    declared = {task.queue for task in app.registry.tasks.values()}
    return sorted(declared | {q.queue for q in app.store.queues_stats()})


def _move_to_next(app: App, clock: Any, queues: Sequence[str], until: datetime | None) -> bool:
    """Move ``clock`` to the first job waiting in ``queues``; False when none
    waits, or none before ``until``."""
    waiting = [j.run_at for j in _all(app, status=[Status.SCHEDULED, Status.QUEUED]) if j.queue in queues]
    if not waiting or (until is not None and min(waiting) > until):
        return False
    first = min(waiting)
    if first > clock():
        clock.advance(first - clock())
    return True


def _all(app: App, **where: Any) -> Iterable[Job]:
    after = None
    while True:
        page = app.client.jobs(after=after, limit=500, **where)
        yield from page.items
        if page.next_cursor is None:
            return
        after = page.next_cursor


def enqueued_jobs(app: App | Task[Any, Any], task: str | Task[Any, Any] | None = None, *,
                  args: Sequence[Any] | None = None, kwargs: dict[str, Any] | None = None, queue: str | None = None,
                  status: Status | Sequence[Status] | None = None, created_after: datetime | None = None
                  ) -> list[Job]:
    """The jobs in ``app``'s store that match, oldest first: of ``task`` (a
    name or the task), with exactly these ``args`` and ``kwargs`` when
    given, in ``queue``, in ``status``. A task alone stands for its app
    and itself: ``enqueued_jobs(send_welcome)``."""
    app, task = _app_and_task(app, task)
    name = task.name if isinstance(task, Task) else task
    found = [job for job in _all(app, task=name, queue=queue, status=status, created_after=created_after)
             if (args is None or list(job.args) == list(args)) and (kwargs is None or dict(job.kwargs) == kwargs)]
    return found[::-1]  # the store lists newest first


def assert_enqueued(app: App | Task[Any, Any], task: str | Task[Any, Any] | None = None, *,
                    args: Sequence[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    queue: str | None = None, count: int | None = None) -> list[Job]:
    """Fail the test unless ``task`` was enqueued with these arguments
    (``count`` times exactly when given, at least once when not); the
    message lists what was enqueued of it instead. Returns the jobs.
    ``assert_enqueued(send_welcome, args=[42])``: the task's own app."""
    app, task = _app_and_task(app, task)
    if task is None:
        raise ConfigError("assert_enqueued needs the task: assert_enqueued(task, ...) or assert_enqueued(app, task, ...)")
    found = enqueued_jobs(app, task, args=args, kwargs=kwargs, queue=queue)
    if (count is None and not found) or (count is not None and len(found) != count):
        name = task.name if isinstance(task, Task) else task
        others = enqueued_jobs(app, task)
        wanted = ", ".join(f"{k}={v!r}" for k, v in (("args", args), ("kwargs", kwargs), ("queue", queue))
                           if v is not None) or "any arguments"
        seen = "; ".join(f"args={list(j.args)!r} kwargs={dict(j.kwargs)!r} queue={j.queue!r}" for j in others[:10])
        raise AssertionError(f"expected {'at least one' if count is None else count} {name} job(s) with {wanted}, "
                             f"found {len(found)}; {name} jobs enqueued: {len(others)}" + (f" ({seen})" if seen else ""))
    return found


def _app_and_task(app: App | Task[Any, Any], task: str | Task[Any, Any] | None
                  ) -> tuple[App, str | Task[Any, Any] | None]:
    if isinstance(app, Task):
        if task is not None:
            raise ConfigError("give the app and the task, or the task alone")
        task, app = app, app.enqueuer  # type: ignore[assignment]
        if not isinstance(app, App):
            raise ConfigError(f"task {task.name!r} is not registered with an app: declare it with @app.task")
    return app, task
