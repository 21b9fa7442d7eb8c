"""A full disk: every refused write says STORE_FULL, nothing is half-written,
and work resumes once space is freed. SQLite on a small tmpfs this test
mounts; PostgreSQL's disk-full error (SQLSTATE 53100) raised by the server."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from redrive import App, JobRequest, Status, StoreFull
from tests.conftest import IN_CI


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


def test_sqlite_on_a_full_disk_refuses_whole_writes_and_recovers(small_disk: Path) -> None:
    app = App(f"sqlite:///{small_disk / 'redrive.db'}")

    @app.task
    def note(text: str) -> str:
        return text

    note.enqueue("first")  # the schema and a first job
    filler = small_disk / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k"], capture_output=True)  # until full
    accepted, refused = 0, []
    for batch in range(200):
        try:
            app.enqueue_many([JobRequest("note", args=[f"b{batch}-{i}-" + "x" * 2000]) for i in range(20)])
            accepted += 20
        except StoreFull as exc:
            refused.append(exc)
        except Exception as exc:  # anything else is the bug this test is for
            pytest.fail(f"a full disk came out as {type(exc).__name__}: {exc}")
        if len(refused) >= 3:
            break
    assert refused and all(exc.code == "STORE_FULL" and "is full" in exc.message for exc in refused)
    # Nothing half-written: exactly the accepted batches are there
    assert len(app.client.jobs(limit=1000).items) == 1 + accepted
    # Space freed: enqueue works again, a worker drains, and the file is sound
    os.remove(filler)
    note.enqueue("after")
    import asyncio

    from tests.integration.test_worker_in_process import _run_until

    asyncio.run(_run_until(app, lambda: all(j.status is Status.SUCCEEDED for j in app.client.jobs(limit=1000).items)))
    app.close()
    with sqlite3.connect(small_disk / "redrive.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


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
