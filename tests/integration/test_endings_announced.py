"""Every ending is told from what the store answered it wrote: a retry that
met a cancel request is a cancel (announced and counted as one), and a
worker learns how a batch ended from the write alone, never by reading the
jobs back (in-process worker, SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta
from typing import Any

from redrive import Actor, App, Fixed, JobRequest, Permanent, Status, Transient, current_job
from redrive.events import Event
from redrive.metrics import Metrics
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SQLiteStore
from tests.integration.test_worker_in_process import _run_until

FAST = Fixed([timedelta(milliseconds=10)])


def _open(db_url: str, tmp_path: Any, counting: bool = False) -> App:
    if db_url.startswith("sqlite"):
        store: Any = (_Counting(SQLiteStore) if counting else SQLiteStore)(str(tmp_path / "redrive.db"))
    else:
        store = (_Counting(PostgresStore) if counting else PostgresStore)(db_url)
    return App(store=store)


def test_a_retry_that_meets_a_cancel_request_is_told_and_counted_as_a_cancel(db_url, tmp_path) -> None:
    app = _open(db_url, tmp_path)
    ops = app.admin(Actor.operator("ops:ana"))

    @app.task(max_attempts=5, backoff=FAST)
    def sync_contacts(account: str) -> None:
        # The cancel is asked while the job runs, and the attempt fails before
        # its worker reads the request (it reads them every half second).
        ops.cancel(current_job().id)
        raise Transient("the CRM answered 503", code="UPSTREAM_5XX")

    metrics = Metrics(app, gauges=False)
    seen: list[Event] = []
    app.events.subscribe(seen.append, names=["job.cancelled", "job.retry_scheduled", "job.failed"])
    job = app.enqueue(sync_contacts, args=["acme"]).job
    asyncio.run(_run_until(app, lambda: app.client.job(job.id).status is Status.CANCELLED))

    assert [(e.name, e.data["by"]) for e in seen] == [("job.cancelled", "ops:ana")]
    last = app.client.job_events(job.id)[-1]
    assert (last.from_status, last.to_status, last.meta["error_code"]) == (
        Status.RUNNING, Status.CANCELLED, "UPSTREAM_5XX")  # the crossing, not a cancel the worker saw
    exposition = metrics.exposition().decode()
    assert 'redrive_jobs_completed_total{error_code="",outcome="cancelled",queue="default",' \
           'task="sync_contacts"} 1.0' in exposition
    assert "redrive_job_retries_scheduled_total{" not in exposition
    app.close()


def _Counting(base: type) -> type:
    """``base`` with a tally of the store calls a worker makes."""

    class Counting(base):  # type: ignore[misc, valid-type]
        calls: Counter[str]

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.calls = Counter()

        def jobs_finish(self, items):  # type: ignore[no-untyped-def]
            self.calls["jobs_finish"] += 1
            return super().jobs_finish(items)

        def job_events_list(self, *, job_id):  # type: ignore[no-untyped-def]
            self.calls["job_events_list"] += 1
            return super().job_events_list(job_id=job_id)

        def job_get(self, *, job_id):  # type: ignore[no-untyped-def]
            self.calls["job_get"] += 1
            return super().job_get(job_id=job_id)

    return Counting


def test_a_batch_of_endings_is_one_write_and_no_read(db_url, tmp_path) -> None:
    app = _open(db_url, tmp_path, counting=True)

    @app.task
    def render(n: int) -> int:
        if n % 3 == 0:
            raise Permanent("not a template", code="BAD_TEMPLATE")
        return n

    told: list[Event] = []
    app.events.subscribe(told.append)  # someone listens: every event is built, dead letters included
    store = app.store
    jobs = [r.job for r in app.client.enqueue_many([JobRequest("render", args=[n]) for n in range(30)])]
    store.calls.clear()  # type: ignore[attr-defined]
    asyncio.run(_run_until(app, lambda: all(app.client.job(j.id).status in (Status.SUCCEEDED, Status.FAILED)
                                            for j in jobs), concurrency=30))
    calls = store.calls  # type: ignore[attr-defined]
    # the test's own condition reads jobs with job_get; the worker reads none
    assert calls["job_events_list"] == 0
    assert 1 <= calls["jobs_finish"] <= len(jobs)
    letters = [e for e in told if e.name == "job.dead_lettered"]
    assert len(letters) == 10 and all(e.data["dead_letter_id"] is not None for e in letters)
    assert len([e for e in told if e.name == "job.succeeded"]) == 20
    app.close()
