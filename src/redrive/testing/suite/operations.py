"""The operator's part of a job's life: a cancel (of a waiting job at once,
of a running one by a request its worker acts on, of many in one write)
and a paused queue every worker reads."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from redrive.core.job import Lease
from redrive.core.states import Status
from redrive.core.transitions import Cancellation, RetryLater
from redrive.errors import IllegalTransition, JobNotFound
from redrive.store.port import Store
from redrive.testing import applied, assert_history, cancel, claim, claim_one, fail, new, revive


def test_cancel_ends_a_waiting_job_at_once_saying_who(store: Store) -> None:
    (waiting,) = [r.job for r in store.jobs_insert(jobs=[new(delay=timedelta(hours=1))])]
    assert cancel(store, waiting.id, "ops:ana").status is Status.CANCELLED
    *_, event = assert_history(store, waiting.id)
    assert (event.to_status, event.meta["by"]) == (Status.CANCELLED, "ops:ana")
    with pytest.raises(IllegalTransition):  # finished: nothing left to cancel
        cancel(store, waiting.id, "ops:ana")
    with pytest.raises(JobNotFound):
        cancel(store, uuid.uuid4(), "ops:ana")


def test_cancel_of_a_running_job_is_a_request_its_worker_ends(store: Store) -> None:
    store.jobs_insert(jobs=[new(), new()])
    job, other = claim(store, 2)
    # When a cancel is asked of a running job, twice
    assert cancel(store, job.id, "ops:ana").status is Status.RUNNING
    assert cancel(store, job.id, "ops:bo").status is Status.RUNNING
    # Then its worker reads the first request, and only for that job
    control = store.control_read(job_ids=[job.id, other.id])
    assert dict(control.cancels) == {job.id: "ops:ana"}
    # And the worker's cancel is fenced on the lease and says who asked
    assert applied(store.jobs_finish([Cancellation(Lease(job.id, uuid.uuid4()), by="ops:ana")])) == set()
    assert applied(store.jobs_finish([Cancellation(job.lease, by="ops:ana", meta={"duration_ms": 5})])) == {job.lease}
    ended = store.job_get(job_id=job.id)
    assert ended.status is Status.CANCELLED and ended.lease_token is None and ended.finished_at is not None
    *_, event = assert_history(store, job.id)
    assert (event.from_status, event.meta["by"], event.meta["duration_ms"]) == (Status.RUNNING, "ops:ana", 5)
    assert store.control_read(job_ids=[job.id]).cancels == {}


def test_many_cancels_in_one_write_answer_each_job_in_the_order_asked(store: Store) -> None:
    """An operator's bulk cancel: one write for a page of jobs, whatever
    each one is (waiting, running, ended, never there)."""
    waiting, later, running, ended = [r.job for r in store.jobs_insert(jobs=[
        new(), new(delay=timedelta(hours=1)), new(queue="busy"), new(queue="done")])]
    running = claim_one(store, queues=["busy"])
    fail(store, claim_one(store, queues=["done"]))
    nobody = uuid.uuid4()
    done = store.jobs_cancel(job_ids=[running.id, waiting.id, nobody, later.id, ended.id], by="ops:ana")
    assert [j.status if j else None for j in done] == [Status.RUNNING, Status.CANCELLED, None,
                                                       Status.CANCELLED, None]
    assert [j.id for j in done if j] == [running.id, waiting.id, later.id]
    assert dict(store.control_read(job_ids=[running.id]).cancels) == {running.id: "ops:ana"}
    for job_id in (waiting.id, later.id):
        *_, event = assert_history(store, job_id)
        assert (event.to_status, event.meta["by"]) == (Status.CANCELLED, "ops:ana")
    assert store.jobs_cancel(job_ids=[], by="ops:ana") == []


def test_a_retry_written_after_a_cancel_was_asked_ends_the_job_cancelled(store: Store) -> None:
    # Given a running job whose cancel was asked before its worker saw it
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    cancel(store, job.id, "ops:ana")
    # When the worker writes a retry anyway
    assert applied(store.jobs_finish([RetryLater(job.lease, timedelta(minutes=5), "NETWORK_ERROR", "down")])) == {job.lease}
    # Then the job does not wait to run again: it is cancelled, by whoever asked
    ended = store.job_get(job_id=job.id)
    assert ended.status is Status.CANCELLED
    *_, event = assert_history(store, job.id)
    assert event.meta["by"] == "ops:ana"


def test_a_cancel_left_on_a_failed_job_does_not_reach_its_revived_run(store: Store) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    cancel(store, job.id, "ops:ana")
    fail(store, job)  # the failure won the race
    revive(store, job.id, "manual_retry", "ops:bo")
    again = claim_one(store)
    assert store.control_read(job_ids=[again.id]).cancels == {}


def test_a_paused_queue_is_read_by_every_worker_until_resumed(store: Store) -> None:
    assert store.control_read(job_ids=[]).paused == {}
    assert store.queue_pause(queue="email", by="ops:ana") is True
    assert store.queue_pause(queue="email", by="ops:bo") is False  # already paused: unchanged
    assert dict(store.control_read(job_ids=[]).paused) == {"email": "ops:ana"}
    assert store.queue_resume(queue="email") is True
    assert store.queue_resume(queue="email") is False
    assert store.control_read(job_ids=[]).paused == {}


