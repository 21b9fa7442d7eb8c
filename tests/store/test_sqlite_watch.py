"""SQLite tells another process's commits by a thread watching PRAGMA
data_version. A subscription is good from the moment the call returns: a
commit made after it is heard however late that thread gets to run (on a
loaded machine, a thread's start can lag by more than the commit takes)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from redrive.core.transitions import Completion
from redrive.store.sqlite.store import SQLiteStore
from redrive.testing import applied, claim_one, new


def test_an_ending_committed_before_the_watch_thread_runs_is_still_told(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "jobs.db")
    store, waiting = SQLiteStore(path), SQLiteStore(path)
    started = threading.Event()
    watch = SQLiteStore._watch

    def late(self: SQLiteStore, *args: object) -> None:
        started.wait(5)  # the thread runs only once the ending has committed
        watch(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(SQLiteStore, "_watch", late)
    try:
        store.jobs_insert(jobs=[new()])
        job = claim_one(store)
        told = threading.Event()
        stop = waiting.finishes_subscribe(job_id=job.id, on_finish=told.set)
        applied(store.jobs_finish([Completion(job.lease, None)]))
        started.set()
        assert told.wait(5), "an ending committed after the subscription was not told"
        stop()
    finally:
        started.set()
        waiting.close()
        store.close()


def test_a_watch_that_cannot_start_is_said_once_and_starts_at_a_later_subscription(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    path = str(folder / "jobs.db")
    store, other = SQLiteStore(path), SQLiteStore(path)
    woken = threading.Event()
    try:
        folder.rename(tmp_path / "away")  # the open connections keep their file; a new one cannot open it
        with caplog.at_level("WARNING", logger="redrive"):
            stops = [store.wakeups_subscribe(lambda _queue: None) for _ in range(3)]
        said = [r.getMessage() for r in caplog.records if "cannot watch" in r.getMessage()]
        assert len(said) == 1, said
        assert "polling only" in said[0] and "Traceback" not in caplog.text
        (tmp_path / "away").rename(folder)
        stops.append(store.wakeups_subscribe(lambda _queue: woken.set()))
        other.jobs_insert(jobs=[new()])  # another connection's commit: heard by the watch now running
        assert woken.wait(5), "the watch did not start once the database could be opened again"
        for stop in stops:
            stop()
    finally:
        other.close()
        store.close()
