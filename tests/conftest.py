"""Shared fixtures: a fresh PostgreSQL database per test (copied from a migrated
template), a fresh SQLite file per test, and waiting on conditions."""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
import pytest

from redrive.store.postgres.store import PostgresStore

T = TypeVar("T")

# Users' projects with tests of their own, run by tests/integration/test_user_project.py and
# test_django.py as their users run them (pytest in that folder), never collected into this suite.
collect_ignore = ["userproject", "djangoproject"]

PG_SERVER = os.environ.get("REDRIVE_TEST_PG", "postgresql://postgres@127.0.0.1:5432")
IN_CI = os.environ.get("CI", "").lower() == "true"


def every_job(client: Any, **where: Any) -> list:
    """All the jobs a filter matches, page after page (a page holds at most 1,000)."""
    jobs, after = [], None
    while True:
        page = client.jobs(after=after, limit=1000, **where)
        jobs += page.items
        if not page.more:
            return jobs
        after = page.next_cursor


def _admin() -> psycopg.Connection:
    return psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True, connect_timeout=5)


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    try:
        admin = _admin()
    except psycopg.OperationalError as exc:
        message = f"PostgreSQL is not reachable at {PG_SERVER}: {exc}"
        if IN_CI:
            pytest.fail(message + " (CI=true: the Postgres suite must run)")
        pytest.skip(message)
    name = f"redrive_tpl_{os.getpid()}"
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    store = PostgresStore(f"{PG_SERVER}/{name}", check_schema=False)
    store.migrate()
    store.close()
    yield name
    _drop_retired()
    with _admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# Databases the tests of this process are done with, dropped together:
# PostgreSQL checkpoints on every DROP DATABASE (about 475 a run when each test
# dropped its own), each flushing the cluster's dirty pages while other tests
# write and sending every page written next to the log whole (docs/testing.md).
# Not in batches through the run: a checkpoint also makes the next write of
# every hot page log the whole page, and a batch of drops in a row is as many
# checkpoints. The batch size only bounds the disk the closed databases hold
# in a long run (about 8 MB each); a suite run's pytest worker holds about 100.
_RETIRED: list[str] = []
_DROP_BATCH = 200
_DROP_LANES = 8


def _retire(name: str) -> None:
    """Shut a test's database: its connections cut, no new ones (as a drop
    would), the drop itself left for a batch or the end of the run."""
    with _admin() as admin:
        if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            return  # the test dropped it itself
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
    _RETIRED.append(name)
    if len(_RETIRED) >= _DROP_BATCH:
        _drop_retired()


def _drop_retired() -> None:
    """Several at once: drops that wait together share one checkpoint (one at a
    time, each waited for its own: 40 s for a worker's hundred, under load)."""
    names, _RETIRED[:] = list(_RETIRED), []

    def drop(batch: list[str]) -> None:
        with _admin() as admin:
            for name in batch:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    lanes = [names[i::_DROP_LANES] for i in range(_DROP_LANES)]
    with ThreadPoolExecutor(_DROP_LANES) as pool:
        list(pool.map(drop, [lane for lane in lanes if lane]))


def _fresh_database(template: str | None) -> Iterator[str]:
    name = f"redrive_t_{uuid.uuid4().hex[:12]}"
    with _admin() as admin:
        clause = f' TEMPLATE "{template}"' if template else ""
        admin.execute(f'CREATE DATABASE "{name}"{clause}')
    yield f"{PG_SERVER}/{name}"
    _retire(name)


@pytest.fixture
def pg_url(pg_template: str) -> Iterator[str]:
    """A migrated, empty database of its own."""
    yield from _fresh_database(pg_template)


@pytest.fixture
def pg_empty_url(pg_template: str) -> Iterator[str]:
    """A database with no redrive schema at all."""
    yield from _fresh_database(None)


@pytest.fixture(scope="session")
def pgbouncer(pg_template: str):
    """A PgBouncer in transaction mode in front of the test server (tests/pgbouncer.py)."""
    from tests.pgbouncer import PgBouncer

    bouncer = PgBouncer(PG_SERVER)
    yield bouncer
    bouncer.stop()


@pytest.fixture
def pgbouncer_url(pg_url: str, pgbouncer, monkeypatch) -> Iterator[str]:
    """A migrated, empty database of its own, reached through PgBouncer in
    transaction mode, with redrive told so (``REDRIVE_DATABASE_POOL_MODE``)
    in this process and the processes it starts."""
    monkeypatch.setenv("REDRIVE_DATABASE_POOL_MODE", "transaction")
    seen = len(pgbouncer.log)
    yield pgbouncer.url(pg_url.rsplit("/", 1)[1])
    # what PgBouncer said during the test: pytest shows it only when the test failed
    print(f"--- pgbouncer during the test, the end of its log ---\n{pgbouncer.log[seen:][-3000:]}")


@pytest.fixture
def pg_test_database(pg_template: str) -> Iterator[str]:
    """An empty database named as a user's test database is ("test" in its name)."""
    name = f"shop_test_{uuid.uuid4().hex[:8]}"
    with _admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield f"{PG_SERVER}/{name}"
    _retire(name)


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'redrive.db'}"


@pytest.fixture(params=["sqlite"])
def example_db(request, tmp_path) -> str:
    """A reference system's database: SQLite, the default;
    ``tests.examples.BOTH_STORES`` runs a test on PostgreSQL too."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'example.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def faketime(monkeypatch) -> Callable[[str], tuple[str, ...]]:
    """Debian's faketime, for a process whose clock is off (CI installs it):
    ``faketime("+300s")`` is what goes before ``python -m ...`` (tests/faketime.py)."""
    if shutil.which("faketime") is None:
        message = "faketime is not installed (scripts/test installs Debian's faketime)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    monkeypatch.setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1")
    return lambda offset: ("faketime", "-f", offset, sys.executable, "-m", "tests.faketime")


@pytest.fixture
def cluster():
    """A PostgreSQL server this test may stop, crash or fill (tests/cluster.py)."""
    from tests.cluster import Cluster

    made = Cluster()
    yield made
    made.remove()


# Files whose tests take over a minute each under the suite's load (the CI log's slowest durations).
_LONGEST = ("tests/matchmaking/test_year.py", "tests/e2e/test_readme_path.py", "tests/bench/test_smoke.py",
            "tests/e2e/test_docs.py", "tests/integration/test_many_hosts.py")


def pytest_collection_modifyitems(config, items) -> None:
    """Longest first, spread over the workers. pytest-xdist's worksteal hands
    each worker an equal run of the collection to start with and later moves
    tests from the busiest worker's end to an idle one, so a long test
    collected late in a run starts late and the whole suite waits for it (the
    matchmaking year takes two to three minutes under load). So each
    worker's run starts with its share of the long fault scenarios (marked
    slow), those of ``_LONGEST`` first; the short tests fill the rest."""
    workers = getattr(config, "workerinput", {}).get("workercount")
    if not workers or config.getoption("dist", None) != "worksteal":
        return
    slow = [i for i in items if i.get_closest_marker("slow")]
    slow.sort(key=lambda item: item.nodeid.split("::")[0] not in _LONGEST)  # stable: otherwise as collected
    rest = iter([i for i in items if not i.get_closest_marker("slow")])
    runs, left = [], len(items)
    for worker in range(workers):  # the sizes worksteal deals out: what is left, shared by who is left
        size = left // (workers - worker)
        left -= size
        run = slow[worker::workers]
        run += itertools.islice(rest, max(0, size - len(run)))
        runs.append(run)
    runs[-1] += rest
    items[:] = [item for run in runs for item in run]


def pytest_sessionfinish(session) -> None:
    """In a pytest-xdist worker: hand the figures its tests measured to the
    controller, which prints them all (pytest_testnodedown below)."""
    from dataclasses import astuple

    from tests.figures import MEASURED

    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["figures"] = [[str(v) for v in astuple(f)] for f in MEASURED]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    from tests.figures import MEASURED, Figure

    MEASURED.extend(Figure(*row) for row in getattr(node, "workeroutput", {}).get("figures", []))


def pytest_terminal_summary(terminalreporter) -> None:
    from tests.figures import table

    rows = table()
    if rows:
        terminalreporter.write_sep("=", "fault suite figures (scenario, figure, value, held to)")
        for row in rows:
            terminalreporter.write_line(row)
