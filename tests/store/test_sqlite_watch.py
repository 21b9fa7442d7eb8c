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
