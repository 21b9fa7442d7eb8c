"""How running jobs end (``Store.jobs_finish``), one table of kinds: what each
kind writes and what the store answers it decided, the crossings (a retry
meeting a cancel request, a lease lost before the write), a batch of every
kind at once, and the reclaim answering in the same values."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest

from redrive.core.job import Job, Lease
from redrive.core.rollups import WAIT, bucket_of
from redrive.core.states import Status
from redrive.core.transitions import (
    LEASE_EXPIRED,
    WORKER_CRASHED,
    Cancellation,
    Completion,
    FailNow,
    Finish,
    Finished,
    Requeue,
    RetryLater,
)
from redrive.store.port import Store
from redrive.testing import applied, assert_history, cancel, claim, claim_one, fail, letter_of, new, revive, wait_for


@dataclass(frozen=True)
class Kind:
    name: str
    make: Callable[[Lease], Finish]
    status: Status  # the job's status after it
    attempts_after: int  # the job's attempts after ending its first run
    event: dict  # what the ending's event says, at least


KINDS = [
    Kind("complete", lambda lease: Completion(lease, {"ok": True}, {"duration_ms": 3}),
         Status.SUCCEEDED, 1, {"duration_ms": 3}),
    Kind("retry", lambda lease: RetryLater(lease, timedelta(minutes=5), "UPSTREAM_5XX", "503", {"duration_ms": 3},
                                           stage="llm", stage_attempts={"llm": 1}),
         Status.QUEUED, 1, {"error_code": "UPSTREAM_5XX", "delay_ms": 300_000, "stage": "llm"}),
    Kind("fail", lambda lease: FailNow(lease, "NOT_PDF", "not a PDF", {"duration_ms": 3}),
         Status.FAILED, 1, {"error_code": "NOT_PDF", "error_class": "NOT_PDF", "escalated": False}),
    Kind("cancel", lambda lease: Cancellation(lease, by="ops:ana", meta={"duration_ms": 3}),
         Status.CANCELLED, 1, {"by": "ops:ana", "duration_ms": 3}),
    Kind("requeue", lambda lease: Requeue(lease, meta={"reason": "shutdown"}),
         Status.QUEUED, 0, {"reason": "shutdown"}),
]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_each_kind_of_ending_writes_its_status_and_answers_what_it_wrote(store: Store, kind: Kind) -> None:
    store.jobs_insert(jobs=[new(task="convert", queue="docs")])
    job = claim_one(store, queues=["docs"])
    item = kind.make(job.lease)
    (done,) = store.jobs_finish([item])
    assert done.item == item and done.lease == job.lease
    assert (done.task, done.queue, done.status, done.attempt) == ("convert", "docs", kind.status, 1)
    now = store.job_get(job_id=job.id)
    assert now is not None and now.status is kind.status and now.lease_token is None
    assert now.attempts == kind.attempts_after
    event = assert_history(store, job.id)[-1]
    assert (event.from_status, event.to_status) == (Status.RUNNING, kind.status)
    assert kind.event.items() <= event.meta.items()
    if kind.status is Status.FAILED:
        letter = letter_of(store, job.id)
        assert done.dead_letter_id == letter.id and event.meta["dead_letter_id"] == letter.id
        assert done.escalated is False
    else:
        assert done.dead_letter_id is None
    assert done.cancelled_by == ("ops:ana" if kind.status is Status.CANCELLED else None)
    # The lease is spent: the same ending again changes nothing
    assert store.jobs_finish([item]) == []


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_an_ending_whose_lease_was_lost_changes_nothing(store: Store, kind: Kind) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    before = store.job_events_list(job_id=job.id)
    assert store.jobs_finish([kind.make(Lease(job.id, uuid.uuid4()))]) == []
    after = store.job_get(job_id=job.id)
    assert after is not None and after.status is Status.RUNNING and after.lease_token == job.lease_token
    assert store.job_events_list(job_id=job.id) == before


def test_a_retry_that_meets_a_cancel_request_ends_cancelled_and_says_who_asked(store: Store) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    cancel(store, job.id, "ops:ana")
    (done,) = store.jobs_finish([RetryLater(job.lease, timedelta(minutes=5), "NETWORK_ERROR", "down",
                                            {"duration_ms": 7})])
    assert (done.status, done.cancelled_by, done.dead_letter_id) == (Status.CANCELLED, "ops:ana", None)
    ended = store.job_get(job_id=job.id)
    assert ended is not None and ended.status is Status.CANCELLED and ended.finished_at is not None
    assert ended.last_error_code == "NETWORK_ERROR"  # the attempt's error is kept
    event = assert_history(store, job.id)[-1]
    assert (event.from_status, event.to_status) == (Status.RUNNING, Status.CANCELLED)
    assert (event.meta["by"], event.meta["error_code"], event.meta["duration_ms"]) == ("ops:ana", "NETWORK_ERROR", 7)
    assert store.control_read(job_ids=[job.id]).cancels == {}


@pytest.mark.parametrize("kind", [k for k in KINDS if k.name != "retry"], ids=lambda k: k.name)
def test_a_cancel_request_does_not_change_other_endings(store: Store, kind: Kind) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    cancel(store, job.id, "ops:bo")
    (done,) = store.jobs_finish([kind.make(job.lease)])
    assert done.status is kind.status
    assert done.cancelled_by == ("ops:ana" if kind.status is Status.CANCELLED else None)


def test_a_batch_of_every_kind_answers_in_its_order_and_skips_lost_leases(store: Store) -> None:
    store.jobs_insert(jobs=[new(queue="mixed") for _ in KINDS])
    jobs = claim(store, len(KINDS), queues=["mixed"])
    stale = Completion(Lease(jobs[0].id, uuid.uuid4()), None)
    items = [stale] + [kind.make(job.lease) for kind, job in zip(KINDS, jobs, strict=True)]
    items.append(items[1])  # the same lease twice: the first wins
    written = store.jobs_finish(items)
    assert [done.item for done in written] == items[1:-1]
    assert [done.status for done in written] == [kind.status for kind in KINDS]


def test_a_success_writes_the_same_whether_its_batch_holds_only_successes_or_every_kind(store: Store) -> None:
    # A store may write a batch of successes its own, shorter way (PostgreSQL does):
    # the job, its history, its rollups and the answer must not tell which way it went.
    store.jobs_insert(jobs=[new(task="convert", queue="docs", args=[n]) for n in range(2)])
    store.jobs_insert(jobs=[new(task="other", queue="docs") for _ in range(2)])
    jobs = {job.args[0] if job.task == "convert" else f"other-{n}": job
            for n, job in enumerate(claim(store, 4, queues=["docs"]))}
    alone, mixed = jobs[0], jobs[1]
    others = [job for key, job in jobs.items() if isinstance(key, str)]
    meta = {"duration_ms": 7, "wait_ms": 30}
    (solo,) = store.jobs_finish([Completion(alone.lease, {"n": 0}, meta), Completion(alone.lease, "again")])
    mix = store.jobs_finish([FailNow(others[0].lease, "NOT_PDF", "not a PDF"), Completion(mixed.lease, {"n": 0}, meta),
                             RetryLater(others[1].lease, timedelta(minutes=5), "UPSTREAM_5XX", "503")])[1]
    for done, job in ((solo, alone), (mix, mixed)):
        assert (done.lease, done.task, done.queue, done.status, done.attempt, done.stage) == \
            (job.lease, "convert", "docs", Status.SUCCEEDED, 1, None)
        assert (done.dead_letter_id, done.escalated, done.cancelled_by) == (None, False, None)
    ended = [store.job_get(job_id=job.id) for job in (alone, mixed)]
    assert all(job is not None for job in ended)
    kept = [(j.status, j.result, j.attempts, j.stage, j.lease_token, j.last_error_code, j.error_code,  # type: ignore[union-attr]
             j.finished_at is not None, j.failed_at) for j in ended]
    assert kept[0] == kept[1] == (Status.SUCCEEDED, {"n": 0}, 1, None, None, None, None, True, None)
    histories = [[(e.from_status, e.to_status, e.attempt, e.meta) for e in assert_history(store, job.id)[1:]]
                 for job in (alone, mixed)]
    assert histories[0] == histories[1] == [(Status.QUEUED, Status.RUNNING, 1, histories[0][0][3]),
                                            (Status.RUNNING, Status.SUCCEEDED, 1, meta)]
    counted: Counter[tuple[str, int]] = Counter()
    for row in store.rollups_read(since=store.now() - timedelta(hours=1), by="task"):
        if row.key == "convert":
            counted[row.kind, row.bucket] += row.n
    assert counted == {("succeeded", bucket_of(7)): 2, (WAIT, bucket_of(30)): 2}
    # and a batch of successes is fenced like any other
    assert store.jobs_finish([Completion(alone.lease, "late"), Completion(Lease(mixed.id, uuid.uuid4()), "x")]) == []


def test_each_success_of_a_batch_keeps_its_own_result_and_meta(store: Store) -> None:
    # A store may send a batch's successes field by field (PostgreSQL does): each
    # job must get its own result and meta, whichever of them are empty.
    store.jobs_insert(jobs=[new(args=[n]) for n in range(4)])
    jobs = sorted(claim(store, 4), key=lambda job: job.args[0])
    told = [(None, {}), ({"a": [1, "x,y"]}, {"duration_ms": 3.5, "note": "a, b"}),
            ("null", {"duration_ms": 4, "wait_ms": 9}), (None, {"wait_ms": 2})]
    items = [Completion(job.lease, result, meta) for job, (result, meta) in zip(jobs, told, strict=True)]
    assert [done.item for done in store.jobs_finish(items)] == items
    for job, (result, meta) in zip(jobs, told, strict=True):
        ended = store.job_get(job_id=job.id)
        assert ended is not None and (ended.status, ended.result) == (Status.SUCCEEDED, result)
        assert assert_history(store, job.id)[-1].meta == meta


def _expire(store: Store, job: Job) -> list[Finished]:
    return wait_for(lambda: [done for done in store.jobs_reclaim() if done.lease.job_id == job.id], timeout=5)


def test_the_reclaim_answers_a_requeue_with_the_attempt_spent(store: Store) -> None:
    store.jobs_insert(jobs=[new(task="t", queue="q", max_attempts=3)])
    job = claim_one(store, queues=["q"], ttl=timedelta(milliseconds=200))
    (done,) = _expire(store, job)
    assert isinstance(done.item, Requeue) and done.by_reclaim and not done.item.refund
    assert (done.lease, done.status, done.attempt, done.task, done.queue) == (job.lease, Status.QUEUED, 1, "t", "q")
    assert store.job_get(job_id=job.id).attempts == 1  # type: ignore[union-attr]


def test_the_reclaim_answers_a_failure_with_its_dead_letter(store: Store) -> None:
    store.jobs_insert(jobs=[new(task="t", queue="q", max_attempts=1)])
    job = claim_one(store, queues=["q"], ttl=timedelta(milliseconds=200))
    (done,) = _expire(store, job)
    assert isinstance(done.item, FailNow) and done.by_reclaim
    assert (done.status, done.item.error_code, done.attempt) == (Status.FAILED, LEASE_EXPIRED, 1)
    letter = letter_of(store, job.id)
    assert done.dead_letter_id == letter.id and letter.error_code == LEASE_EXPIRED and not done.escalated


def test_a_reclaim_failure_after_a_replay_of_the_same_failure_escalates(store: Store) -> None:
    store.jobs_insert(jobs=[new(max_attempts=1)])
    first = claim_one(store)
    fail(store, first, "LEASE_EXPIRED")
    revive(store, first.id, "replay", "ops:ana")
    again = claim_one(store, ttl=timedelta(milliseconds=200))
    (done,) = _expire(store, again)
    assert done.escalated and done.dead_letter_id == letter_of(store, again.id).id


def test_a_dead_workers_leases_are_taken_back_at_once(store: Store) -> None:
    # Given a worker process holding two jobs (one on its last attempt) and another holding one
    store.jobs_insert(jobs=[new(task="t", queue="q", max_attempts=3), new(task="t", queue="q", max_attempts=1)])
    held = store.jobs_claim(queues=["q"], limit=2, worker_id="w-dead", lease_ttl=timedelta(minutes=5))
    store.jobs_insert(jobs=[new(task="t", queue="q")])
    other = store.jobs_claim(queues=["q"], limit=1, worker_id="w-alive", lease_ttl=timedelta(minutes=5))
    assert len(held) == 2 and len(other) == 1
    # When its supervisor saw it die, long before its leases would expire
    done = {d.lease: d for d in store.jobs_reclaim(worker_id="w-dead")}
    # Then both are taken back now: the one with attempts left queued (the attempt spent), the last one failed
    assert set(done) == {job.lease for job in held}
    by_attempts = {job.max_attempts: done[job.lease] for job in held}
    again, last = by_attempts[3], by_attempts[1]
    assert isinstance(again.item, Requeue) and again.status is Status.QUEUED and again.by_reclaim
    assert isinstance(last.item, FailNow) and last.status is Status.FAILED and last.item.error_code == WORKER_CRASHED
    assert letter_of(store, last.lease.job_id).error_code == WORKER_CRASHED and last.dead_letter_id is not None
    assert assert_history(store, again.lease.job_id)[-1].meta == {"reason": "worker_crashed", "worker": "w-dead"}
    # And the other worker's job runs on; the dead one's late writes change nothing
    assert store.job_get(job_id=other[0].id).status is Status.RUNNING  # type: ignore[union-attr]
    assert applied(store.jobs_finish([Completion(job.lease, "late") for job in held])) == set()
    assert store.jobs_reclaim(worker_id="w-dead") == []
