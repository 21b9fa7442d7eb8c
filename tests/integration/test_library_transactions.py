"""Enqueue inside the transactions of the libraries people use, against
the real libraries and databases: a SQLAlchemy ``Session`` and
``Connection``, their async twins ``AsyncSession`` and ``AsyncConnection``
(PostgreSQL), and Django's connection inside ``transaction.atomic()``.
The job exists if and only if the caller's transaction commits, and a
worker can claim it once it has."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from redrive import App, ConfigError, JobRequest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def app(db_url: str) -> Iterator[App]:
    made = App(db_url)
    made.client.store.migrate()

    @made.task
    def welcome(user_id: int) -> None: ...

    yield made
    made.close()


def _engine(url: str) -> sqlalchemy.Engine:
    # psycopg 3 on PostgreSQL (redrive's driver), the standard library's sqlite3 on SQLite
    return sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


def _claimable(app: App) -> list[list]:
    claimed = app.store.jobs_claim(queues=["default"], limit=10, worker_id="test", lease_ttl=timedelta(seconds=30))
    return [job.args for job in claimed]


def test_a_session_that_rolls_back_leaves_no_job_and_one_that_commits_leaves_one(db_url: str, app: App) -> None:
    engine = _engine(db_url)
    with engine.connect() as conn:  # the user's own table, in the same database
        conn.execute(sqlalchemy.text("CREATE TABLE signup (id integer PRIMARY KEY)"))
        conn.commit()
    with Session(engine) as session:
        session.execute(sqlalchemy.text("INSERT INTO signup VALUES (1)"))
        app.enqueue("welcome", args=[1], conn=session)
        session.rollback()
    with Session(engine) as session, session.begin():
        session.execute(sqlalchemy.text("INSERT INTO signup VALUES (2)"))
        app.enqueue("welcome", args=[2], conn=session)
    # Then only the committed one is there, and a worker's claim finds it
    assert [j.args for j in app.client.jobs(limit=10).items] == [[2]]
    assert _claimable(app) == [[2]]
    with engine.connect() as conn:
        assert conn.execute(sqlalchemy.text("SELECT id FROM signup")).scalars().all() == [2]
    engine.dispose()


def test_a_sqlalchemy_connection_joins_its_transaction_too(db_url: str, app: App) -> None:
    engine = _engine(db_url)
    with engine.connect() as conn:
        app.enqueue("welcome", args=[1], conn=conn)
        conn.rollback()
        app.enqueue("welcome", args=[2], conn=conn)
        conn.commit()
    assert _claimable(app) == [[2]]
    engine.dispose()


def test_django_atomic_commits_or_rolls_back_the_job_with_it(db_url: str, app: App) -> None:
    done = subprocess.run([sys.executable, str(REPO / "tests" / "apps" / "django_enqueue.py"), db_url],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout)
    # The rolled-back enqueue left nothing, the committed one is there, and outside atomic() it is refused
    assert said["jobs"] == [2]
    assert said["outside"] == "a Django connection joins a transaction only inside transaction.atomic()"
    assert _claimable(app) == [[2]]


def test_something_else_as_conn_is_a_clear_error(sqlite_url: str) -> None:
    app = App(sqlite_url)

    @app.task
    def welcome(user_id: int) -> None: ...

    with pytest.raises(ConfigError, match=r"joins only an sqlite3\.Connection"):
        app.enqueue("welcome", args=[1], conn=object())
    app.close()


def test_an_async_session_that_rolls_back_leaves_no_job_and_one_that_commits_leaves_one(pg_url: str) -> None:
    app = App(pg_url)

    @app.task
    def welcome(user_id: int) -> None: ...

    async def scenario() -> list:
        engine = create_async_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
        async with engine.begin() as conn:
            await conn.execute(sqlalchemy.text("CREATE TABLE signup (id integer PRIMARY KEY)"))
        async with AsyncSession(engine) as session:
            await session.execute(sqlalchemy.text("INSERT INTO signup VALUES (1)"))
            await welcome.options(conn=session).enqueue_async(1)  # the task's own enqueue joins it too
            await session.rollback()
        async with AsyncSession(engine) as session, session.begin():
            await session.execute(sqlalchemy.text("INSERT INTO signup VALUES (2)"))
            first = await app.enqueue_async("welcome", args=[2], conn=session, idempotency_key="signup-2")
            again = await app.enqueue_async("welcome", args=[2], conn=session, idempotency_key="signup-2")
            assert (first.duplicate, again.duplicate, again.job.id) == (False, True, first.job.id)
        # An AsyncConnection, its transaction begun by the enqueue: rolled back, then committed
        async with engine.connect() as conn:
            await app.enqueue_many_async([JobRequest("welcome", args=[3])], conn=conn)
            await conn.rollback()
            await app.enqueue_many_async([JobRequest("welcome", args=[4]), JobRequest("welcome", args=[5])], conn=conn)
            await conn.commit()
        async with engine.connect() as conn:
            ids = (await conn.execute(sqlalchemy.text("SELECT id FROM signup"))).scalars().all()
        await engine.dispose()
        return list(ids)

    assert asyncio.run(scenario()) == [2]
    assert sorted(j.args for j in app.client.jobs(limit=10).items) == [[2], [4], [5]]
    assert sorted(_claimable(app)) == [[2], [4], [5]]
    app.close()


def test_an_async_transaction_on_sqlite_is_a_clear_error(sqlite_url: str) -> None:
    app = App(sqlite_url)

    @app.task
    def welcome(user_id: int) -> None: ...

    with pytest.raises(ConfigError, match="only on PostgreSQL"):
        asyncio.run(app.enqueue_async("welcome", args=[1], conn=object()))
    assert app.client.jobs(limit=10).items == []
    app.close()
