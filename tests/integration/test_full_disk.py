"""A full disk: every refused write says STORE_FULL, nothing is half-written,
and work resumes once space is freed. SQLite on a small tmpfs this test
mounts; PostgreSQL's disk-full error (SQLSTATE 53100) raised by the server."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from redrive import App, JobRequest, Status, StoreFull
from redrive.store.postgres.store import PostgresStore
from tests.conftest import IN_CI, every_job
from tests.figures import record
from tests.integration.test_worker_in_process import _run_until


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        if IN_CI:
            pytest.fail(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
        pytest.skip("mounting a tmpfs needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill_refuse_free_drain(app: App, disk: Path, scenario: str) -> None:
    """Fill the disk, enqueue until refused three times, check that every
    refusal said STORE_FULL and nothing was half-written, free the space and
    drain everything with a worker."""

    @app.task
    def note(text: str) -> str:
        return text

    note.enqueue("first")  # the schema and a first job
    filler = disk / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k"], capture_output=True)  # until full
    accepted, refused = 0, []
    for batch in range(500):
        try:
            app.enqueue_many([JobRequest("note", args=[f"b{batch}-{i}-" + "x" * 2000]) for i in range(20)])
            accepted += 20
        except StoreFull as exc:
            refused.append(exc)
        except Exception as exc:  # anything else is the bug this test is for
            pytest.fail(f"a full disk came out as {type(exc).__name__}: {exc}")
        if len(refused) >= 3:
            break
    full = sum(exc.code == "STORE_FULL" and "is full" in exc.message for exc in refused)
    record(scenario, "refused enqueues that said STORE_FULL", f"{full} of {len(refused)}", "all")
    assert refused and full == len(refused)
    # Nothing half-written: exactly the accepted batches are there
    stored = len(every_job(app.client))
    record(scenario, "jobs half-written", stored - 1 - accepted, "0")
    assert stored == 1 + accepted
    # Space freed: enqueue works again and a worker drains
    os.remove(filler)
    note.enqueue("after")
    asyncio.run(_run_until(app, lambda: all(j.status is Status.SUCCEEDED for j in every_job(app.client))))
    record(scenario, "drained after space was freed", "yes", "yes")


def test_sqlite_on_a_full_disk_refuses_whole_writes_and_recovers(small_disk: Path) -> None:
    app = App(f"sqlite:///{small_disk / 'redrive.db'}")
    _fill_refuse_free_drain(app, small_disk, "SQLite disk full")
    app.close()
    with sqlite3.connect(small_disk / "redrive.db") as conn:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    record("SQLite disk full", "integrity check", integrity, "ok")
    assert integrity == "ok"


def test_postgresql_on_a_full_disk_refuses_whole_writes_and_recovers(cluster, tmp_path: Path) -> None:
    # The database's files on a small tmpfs of their own (a tablespace), its WAL
    # on the server's disk: the data volume fills, the server stays up.
    disk = Path(tempfile.mkdtemp(prefix="redrive-full-"))
    os.chmod(disk, 0o755)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700,uid=postgres,gid=postgres",
                           "tmpfs", str(disk)], capture_output=True)
    if done.returncode != 0:
        if IN_CI:
            pytest.fail(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
        pytest.skip("mounting a tmpfs needs root")
    try:
        with psycopg.connect(cluster.url, autocommit=True) as admin:
            admin.execute(f"CREATE TABLESPACE small LOCATION '{disk}'")
            admin.execute("CREATE DATABASE full_disk TABLESPACE small")
        url = cluster.url.rsplit("/", 1)[0] + "/full_disk"
        with closing(PostgresStore(url, check_schema=False)) as migrating:
            migrating.migrate()
        app = App(url)
        _fill_refuse_free_drain(app, disk, "PostgreSQL disk full")
        app.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
            indexes = conn.execute("""SELECT c.oid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                                      JOIN pg_am a ON a.oid = c.relam
                                      WHERE c.relname LIKE 'redrive%' AND a.amname = 'btree'""").fetchall()
            for (index,) in indexes:
                conn.execute("SELECT bt_index_check(%s::regclass, true)", (index,))  # raises if corrupt
        record("PostgreSQL disk full", "amcheck of every redrive index", f"ok ({len(indexes)})", "ok")
        assert indexes
    finally:
        cluster.remove()
        subprocess.run(["umount", "-l", str(disk)], check=False)
        shutil.rmtree(disk, ignore_errors=True)


def test_postgresql_reports_a_full_disk_as_store_full(pg_url: str) -> None:
    # The server's own error, raised where an insert would fail for want of space
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("""
            CREATE FUNCTION full_disk() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full';
            END $$;
            CREATE TRIGGER full_disk BEFORE INSERT ON redrive_job FOR EACH ROW EXECUTE FUNCTION full_disk();
        """)
    app = App(pg_url)

    @app.task
    def note(text: str) -> str:
        return text

    with pytest.raises(StoreFull) as raised:
        note.enqueue(str(uuid.uuid4()))
    assert raised.value.code == "STORE_FULL" and "is full" in raised.value.message
    assert app.client.jobs().items == []
    app.close()
