"""What an enqueue answers: each job as the store wrote it, built when it is
read, so a batch whose answer nobody reads leaves Python's garbage collector
a few objects a job, not a whole job record each (docs/performance.md)."""

from __future__ import annotations

import gc
from datetime import timedelta
from uuid import UUID

from redrive import App, Dependency, EnqueueResult, Job, JobRequest, Status


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


def test_an_answer_compares_and_prints_as_the_job_and_whether_it_was_a_duplicate(db_url: str) -> None:
    app = App(db_url)

    @app.task
    def send(to: str) -> None: ...

    try:
        made = app.enqueue("send", args=["ann"], idempotency_key="welcome-ann")
        again = app.enqueue("send", args=["ann"], idempotency_key="welcome-ann")
        assert again.duplicate and not made.duplicate
        assert again.job.id == made.job.id
        assert made == EnqueueResult(made.job) and again == EnqueueResult(again.job, duplicate=True)
        assert made != again, "one was made, the other found"
        assert repr(made) == f"EnqueueResult(job={made.job!r}, duplicate=False)"
    finally:
        app.store.close()


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
