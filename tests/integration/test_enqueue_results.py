"""What an enqueue answers: each job as the store wrote it, built when it is
read, so a batch whose answer nobody reads leaves Python's garbage collector
a few objects a job, not a whole job record each; and a big batch sets off
no collection while it is built and written (bench/NOTES.md)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from redrive import App, ConfigError, Dependency, EnqueueResult, Job, JobRequest, Status


def _stored_ids(app: App) -> set[UUID]:
    """The ids of the jobs the store holds, read without keeping its job records."""
    return {job.id for job in app.client.jobs(limit=500).items}


def _built(ids: set[UUID]) -> int:
    """How many job records with these ids exist (another thread's jobs are not counted)."""
    gc.collect()
    return sum(1 for thing in gc.get_objects() if type(thing) is Job and thing.id in ids)


def test_a_batch_answers_each_job_as_stored_and_builds_it_only_when_read(db_url: str) -> None:
    app = App(db_url, dependencies=[Dependency("mail")])

    @app.task(dependencies=["mail"])
    def send(to: str) -> None: ...

    try:
        results = app.enqueue_many([JobRequest("send", args=[f"u{n}"]) for n in range(200)]
                                   + [JobRequest("send", args=["later"], delay=timedelta(hours=1))])
        ids = _stored_ids(app)
        assert len(ids) == 201
        assert _built(ids) == 0, "no job record is built before one is read"
        assert all(not result.duplicate for result in results)

        for result in (results[0], results[-1]):
            assert result.job == app.client.job(result.job.id), "the answer is the job the store holds"
            assert result.job is result.job, "built once"
        assert results[0].job.status is Status.QUEUED and results[-1].job.status is Status.SCHEDULED
        assert results[0].job.args == ["u0"] and results[0].job.dependencies == ["mail"]
        assert _built(ids) == 2, "the two read, and no other"
    finally:
        app.store.close()


@pytest.fixture
def app(db_url: str) -> Iterator[App]:
    """An app with one task, ``send(to)``."""
    made = App(db_url)

    @made.task
    def send(to: str) -> None: ...

    yield made
    made.store.close()


def test_an_answer_compares_and_prints_as_the_job_and_whether_it_was_a_duplicate(app: App) -> None:
    made = app.enqueue("send", args=["ann"], idempotency_key="welcome-ann")
    again = app.enqueue("send", args=["ann"], idempotency_key="welcome-ann")
    assert again.duplicate and not made.duplicate
    assert again.job.id == made.job.id
    assert made == EnqueueResult(made.job) and again == EnqueueResult(again.job, duplicate=True)
    assert made != again, "one was made, the other found"
    assert repr(made) == f"EnqueueResult(job={made.job!r}, duplicate=False)"


def test_a_batch_of_tasks_taking_turns_keeps_each_jobs_own_dependencies(db_url: str) -> None:
    # PostgreSQL writes a batch's shared dependencies once per statement: jobs
    # of tasks taking turns, keyed or not, must each keep their own task's.
    app = App(db_url, dependencies=[Dependency("mail"), Dependency("sms")])

    @app.task(dependencies=["mail"])
    def send(to: str) -> None: ...

    @app.task(dependencies=["sms", "mail"])
    def text(to: str) -> None: ...

    @app.task
    def note(to: str) -> None: ...

    declared = {"send": ["mail"], "text": ["sms", "mail"], "note": []}
    tasks = list(declared)
    try:
        requests = [JobRequest(tasks[n % 3], args=[f"u{n}"]) for n in range(300)]
        requests += [JobRequest(tasks[n % 3], args=[f"k{n}"], idempotency_key=f"k{n}") for n in range(30)]
        results = app.enqueue_many(requests)
        stored = {job.id: job for job in app.client.jobs(limit=1000).items}
        assert len(stored) == 330
        for request, result in zip(requests, results, strict=True):
            job = stored[result.job.id]
            assert (job.task, job.args) == (request.task, list(request.args))
            assert job.dependencies == declared[job.task], job
            assert result.job.dependencies == declared[job.task]
    finally:
        app.store.close()


@contextmanager
def _collections_inside(app: App) -> Iterator[list[int]]:
    """The generation of each garbage collection that begins while the store
    takes a batch (the jobs are built as it takes them), with collections
    made frequent: Python's default would set off a few in 1,000 jobs, this
    dozens."""
    store = app.client.store
    insert, inside, seen = store.jobs_insert, threading.Event(), []

    def watched(**kwargs: Any) -> Any:
        inside.set()
        try:
            return insert(**kwargs)
        finally:
            inside.clear()

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and inside.is_set():
            seen.append(info["generation"])

    thresholds = gc.get_threshold()
    store.jobs_insert = watched  # type: ignore[method-assign]
    gc.set_threshold(100, 2, 2)
    gc.callbacks.append(counted)
    try:
        yield seen
    finally:
        gc.callbacks.remove(counted)
        gc.set_threshold(*thresholds)
        del store.jobs_insert


def test_a_big_batch_sets_off_no_garbage_collection_while_it_is_written(app: App) -> None:
    with _collections_inside(app) as collections:
        results = app.enqueue_many([JobRequest("send", args=[f"u{n}"]) for n in range(1000)])
        during_the_batch = list(collections)
        # a small batch makes too few objects to be worth holding the collector for
        few = app.enqueue_many([JobRequest("send", args=[f"v{n}"]) for n in range(99)])
    assert during_the_batch == []
    assert len(results) == 1000 and app.client.job(results[-1].job.id).args == ["u999"]
    assert len(few) == 99 and collections, "the small batch let collections run"
    assert gc.isenabled(), "the collector is back on after the batch"


def test_the_collector_is_left_as_the_caller_had_it_whatever_the_batch_does(app: App) -> None:
    with _collections_inside(app) as collections:
        # a batch refused half-way (job 500 gives both a time and a delay) writes nothing
        now = datetime.now(UTC)
        refused = [JobRequest("send", args=[f"u{n}"]) for n in range(1000)]
        refused[500] = JobRequest("send", args=["both"], run_at=now, delay=timedelta(seconds=1))
        with pytest.raises(ConfigError, match="not both"):
            app.enqueue_many(refused)
        assert gc.isenabled() and collections == []
        assert app.client.jobs(limit=10).items == []
        # and a caller that had the collector off finds it off
        gc.disable()
        try:
            app.enqueue_many([JobRequest("send", args=[f"w{n}"]) for n in range(1000)])
            assert not gc.isenabled()
        finally:
            gc.enable()
