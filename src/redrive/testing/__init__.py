"""Testing with redrive: helpers, a clock to move by hand, and the store
conformance suite (``redrive.testing.suite``) that every store of redrive's
passes and a store of your own can run too.

To hold your own store (a ``FullStore``: the runtime's ``Store``, the ``Operations``
and the ``Reads``) to the same behaviour, in a test module of yours::

    import pytest
    from redrive.testing import Clock
    from redrive.testing.suite import *  # noqa: F403  (every conformance test)

    @pytest.fixture
    def store():
        made = MyStore(...)                     # a fresh, empty, migrated database
        yield made
        made.close()

    @pytest.fixture
    def clock():
        return Clock()

    @pytest.fixture
    def timed_store(clock):
        made = MyStore(..., clock=clock)        # the store reads ``clock`` instead of its database's
        yield made
        made.close()

    @pytest.fixture
    def reopen():
        return lambda store: MyStore(...)      # another handle on the same database

It needs pytest (and Hypothesis for nothing yet); ``import redrive`` never
imports this package. The write parameters a store receives are exported
here, so a store can be written against the public surface alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from redrive.core.dead_letters import Revival, RevivePlan, revive_plan
from redrive.core.job import DeadLetter, DeadLetterFilter, Job, JobKey, Lease, NewJob, StageDone
from redrive.core.outbox import OutboxChange
from redrive.core.states import Status, is_legal
from redrive.core.transitions import Cancellation, Completion, FailNow, Finished, Requeue, RetryLater
from redrive.errors import IllegalTransition, JobNotFound
from redrive.events import Event
from redrive.store.operations import FullStore, Operations
from redrive.store.port import Store
from redrive.store.reads import JobFilter, Reads
from redrive.stream import EventStream
from redrive.testing.tasks import Drained, assert_enqueued, drain, enqueued_jobs, isolated
from redrive.testing.workflows import assert_workflow, workflow_jobs, workflows_created

__all__ = [
    "TTL", "Cancellation", "Clock", "Completion", "DeadLetterFilter", "FailNow", "Finished", "FullStore", "JobFilter",
    "JobKey", "Lease", "NewJob", "Operations", "OutboxChange", "Reads", "Requeue", "RetryLater", "Revival", "RevivePlan", "StageDone", "Store",
    "applied", "assert_history", "assert_invariants", "cancel", "claim", "claim_one", "count_jobs", "fail", "letter_of", "new",
    "reclaim", "revive", "wait_for", "wait_for_async",
    "Drained", "assert_enqueued", "assert_workflow", "drain", "enqueued_jobs", "isolated", "workflow_jobs",
    "workflows_created",
]

T = TypeVar("T")

TTL = timedelta(seconds=30)


class Clock:
    """A clock a test moves by hand; every store of redrive's can read it
    (``clock=``) instead of the database's."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now or datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


def wait_for(condition: Callable[[], T], *, timeout: float = 10.0, every: float = 0.02,
             what: str | None = None) -> T:
    """Call ``condition`` until it returns something truthy, and return that;
    fail at the deadline, saying ``what`` did not happen. A test waits on
    what it expects (a job's state, a line in a log, a port that answers),
    never for a fixed time."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or condition} did not happen within {timeout:g} s")
        time.sleep(every)


async def wait_for_async(condition: Callable[[], T], *, events: EventStream | None = None, timeout: float = 10.0,
                         every: float = 0.1, what: str | None = None) -> T:
    """``wait_for`` inside a running event loop (a test that runs a worker on
    its own loop), without blocking the loop: ``condition`` is checked again
    as soon as ``events`` (an app's ``app.events``) announces anything, and
    at least every ``every`` seconds in case what it reads changed silently."""
    loop = asyncio.get_running_loop()
    announced = asyncio.Event()

    def wake(_: Event) -> None:  # on whichever thread announces
        loop.call_soon_threadsafe(announced.set)

    stop = events.subscribe(wake) if events is not None else None
    deadline = time.monotonic() + timeout
    try:
        while True:
            announced.clear()  # before the check: an announcement during it wakes the wait at once
            value = condition()
            if value:
                return value
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{what or condition} did not happen within {timeout:g} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(announced.wait(), min(every, left))
    finally:
        if stop is not None:
            stop()


def new(
    *, task: str = "t", queue: str = "default", priority: int = 0, max_attempts: int = 3,
    run_at: datetime | None = None, delay: timedelta | None = None, args: list[Any] | None = None,
    stage: str | None = None, owner: str | None = None, dependencies: tuple[str, ...] = (),
) -> NewJob:
    """A job to insert, as a client would build it."""
    return NewJob(
        id=uuid.uuid4(), task=task, queue=queue, args=args or [], kwargs={"k": "v"},
        priority=priority, max_attempts=max_attempts, run_at=run_at, delay=delay, stage=stage,
        owner=owner, dependencies=dependencies,
    )


def claim(store: Store, limit: int = 10, *, ttl: timedelta = TTL, queues: Any = ("default",),
          blocked: Any = (), limits: Any = None) -> list[Job]:
    return store.jobs_claim(queues=list(queues), limit=limit, worker_id="w-test", lease_ttl=ttl,
                            blocked=blocked, limits=limits)


def claim_one(store: Store, **kwargs: Any) -> Job:
    (job,) = claim(store, 1, **kwargs)
    return job


def assert_invariants(job: Job) -> None:
    """A result only when succeeded, an error only when failed, lease fields only when running."""
    assert (job.result is None) or job.status is Status.SUCCEEDED
    assert (job.error_code is not None) == (job.status is Status.FAILED)
    assert (job.failed_at is not None) == (job.status is Status.FAILED)
    held = (job.lease_token, job.lease_owner, job.lease_expires_at)
    if job.status is Status.RUNNING:
        assert None not in held
    else:
        assert held == (None, None, None)


def assert_history(store: Store, job_id: uuid.UUID) -> list[Any]:
    """Every event is a legal transition, chained from nothing to the job's state."""
    events = store.job_events_list(job_id=job_id)
    assert events, "a job without events"
    before = None
    for event in events:
        assert event.from_status == before, events
        assert is_legal(event.from_status, event.to_status), event
        before = event.to_status
    job = store.job_get(job_id=job_id)
    assert job is not None and job.status == before
    assert_invariants(job)
    return events


def applied(finished: list[Finished]) -> set[Lease]:
    """The leases a ``jobs_finish`` applied."""
    return {done.lease for done in finished}


def reclaim(store: Store) -> list[uuid.UUID]:
    """Reclaim expired leases; the ids of the jobs reclaimed."""
    return [done.lease.job_id for done in store.jobs_reclaim()]


def fail(store: Store, job: Job, code: str = "AUTH_DENIED", *, retryable: bool = False, **extra: Any) -> None:
    """Fail a running job for good (its dead letter is written with it)."""
    item = FailNow(job.lease, code, f"{code} happened", error_class=extra.pop("error_class", code),
                   retryable=retryable, **extra)
    assert applied(store.jobs_finish([item])) == {job.lease}


def letter_of(store: FullStore, job_id: uuid.UUID) -> DeadLetter:
    """The newest dead letter of a job."""
    (letter,) = [d for d in store.dead_letters_page(where=DeadLetterFilter(), limit=1000) if d.job_id == job_id][:1]
    return letter


def count_jobs(store: Reads) -> dict[Status, int]:
    """Every job of the store by status, page after page: for tests, never a page."""
    counts = dict.fromkeys(Status, 0)
    after = None
    while True:
        page = store.jobs_page(where=JobFilter(), after=after, limit=1000)
        for job in page.items:
            counts[job.status] += 1
        if page.next_cursor is None:
            return counts
        after = page.next_cursor


def cancel(store: FullStore, job_id: uuid.UUID, by: str) -> Job:
    """Cancel one job (``jobs_cancel``): the job as it now is, cancelled or
    still running with the request recorded; ``JobNotFound`` or
    ``IllegalTransition`` when there is nothing to cancel."""
    (done,) = store.jobs_cancel(job_ids=[job_id], by=by)
    if done is None:
        found = store.job_get(job_id=job_id)
        if found is None:
            raise JobNotFound(f"no job has id {job_id}")
        raise IllegalTransition(f"job {job_id} is {found.status}; only an unfinished job can be cancelled")
    return done


def revive(store: FullStore, job_id: uuid.UUID, reason: str, by: str | None, *, from_start: bool = False,
           first_stage: str | None = None, dead_letter_id: int | None = None, job: Job | None = None) -> Job | None:
    """Plan as the operator API does (from the job as read now), then apply."""
    job = job or store.job_get(job_id=job_id)
    assert job is not None
    plan = revive_plan(job, reason=reason, by=by, from_start=from_start, first_stage=first_stage)
    (revived,) = store.jobs_revive(revivals=[Revival(job_id, plan, dead_letter_id)])
    return revived
