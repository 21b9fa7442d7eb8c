"""Jobs through their life on a store: enqueue, claim, fenced writes,
reclaim and the job list (cancels and pauses: ``operations``)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from redrive.core.job import JobKey, Lease, NewJob, StageDone
from redrive.core.states import Status
from redrive.core.transitions import LEASE_EXPIRED, Completion, FailNow, Requeue, RetryLater
from redrive.store.port import Store
from redrive.store.reads import JobFilter
from redrive.testing import TTL, applied, assert_history, claim, claim_one, count_jobs, new, reclaim, wait_for

# -- enqueue -------------------------------------------------------------------


def test_insert_creates_queued_jobs_with_an_event(store: Store) -> None:
    # Given two new jobs
    requests = [new(args=[1]), new(args=[2])]
    # When they are inserted
    jobs = [r.job for r in store.jobs_insert(jobs=requests)]
    # Then they come back in order, queued, untouched, with a creation event
    assert [j.id for j in jobs] == [r.id for r in requests]
    for job in jobs:
        assert job.status is Status.QUEUED
        assert job.attempts == 0 and job.kwargs == {"k": "v"}
        (event,) = assert_history(store, job.id)
        assert (event.from_status, event.to_status, event.attempt) == (None, Status.QUEUED, 0)
    assert store.job_get(job_id=jobs[1].id).args == [2]


def test_each_job_of_a_batch_keeps_its_own_trace_context_in_its_creation_event(store: Store) -> None:
    # Given a batch bigger than a store's insert chunk, whose trace context
    # changes part-way, with jobs without one and keyed jobs among them
    first, second = {"traceparent": "00-" + "a" * 32 + "-" + "1" * 16 + "-01"}, {"traceparent": "00-" + "b" * 32
                                                                                + "-" + "2" * 16 + "-01"}
    traces = [first] * 150 + [None] * 20 + [second] * 130
    jobs = [replace(new(args=[n]), trace=trace,
                    key=JobKey(f"k{n}", 1, "fp") if n % 50 == 7 else None) for n, trace in enumerate(traces)]
    # When they are inserted in one call
    created = [r.job for r in store.jobs_insert(jobs=jobs)]
    # Then every job is created, in order, and its creation event carries its
    # own context (or none)
    assert [j.id for j in created] == [j.id for j in jobs]
    for job, trace in zip(jobs, traces, strict=True):
        (event,) = store.job_events_list(job_id=job.id)
        assert event.meta == ({"trace": trace} if trace else {}), job.args


def test_a_delayed_job_is_scheduled_and_not_claimed_before_its_time(store: Store) -> None:
    (job,) = [r.job for r in store.jobs_insert(jobs=[new(delay=timedelta(milliseconds=300))])]
    assert job.status is Status.SCHEDULED
    assert job.run_at >= store.now() + timedelta(milliseconds=150)
    assert claim(store) == []
    claimed = wait_for(lambda: claim(store), timeout=5)
    assert claimed[0].id == job.id
    events = assert_history(store, job.id)
    assert [e.to_status for e in events] == [Status.SCHEDULED, Status.RUNNING]


# -- claim -----------------------------------------------------------------------


def test_claim_takes_due_jobs_by_priority_then_run_at(store: Store) -> None:
    now = store.now()
    late_low = new(priority=1, run_at=now - timedelta(seconds=10))
    recent = new(priority=0, run_at=now - timedelta(seconds=1))
    older = new(priority=0, run_at=now - timedelta(seconds=5))
    future = new(priority=-5, run_at=now + timedelta(hours=1))
    store.jobs_insert(jobs=[late_low, recent, older, future])
    assert [j.id for j in claim(store)] == [older.id, recent.id, late_low.id]


def test_a_big_batch_answers_each_job_as_stored_whether_due_now_later_or_in_the_past(store: Store) -> None:
    # Given 300 jobs (more than one statement's worth on PostgreSQL): most due
    # at once, some after a delay, some at a time to come, some at a time past
    past, later = store.now() - timedelta(hours=1), store.now() + timedelta(hours=1)
    kinds = [{}, {}, {}, {"delay": timedelta(minutes=5)}, {"run_at": later}, {"run_at": past}]
    batch = [new(**kinds[i % len(kinds)]) for i in range(300)]
    # When they are enqueued in one batch
    made = [r.job for r in store.jobs_insert(jobs=batch)]
    # Then each answer is the job as stored, in the batch's order
    assert [job.id for job in made] == [job.id for job in batch]
    assert made == [store.job_get(job_id=job.id) for job in batch]
    statuses = [job.status for job in made[:6]]
    assert statuses == [Status.QUEUED] * 3 + [Status.SCHEDULED, Status.SCHEDULED, Status.QUEUED]
    assert made[5].run_at == past and made[0].run_at == made[0].created_at


def test_a_big_batch_due_now_keeps_every_value_as_given(store: Store) -> None:
    # Given 300 jobs due now (PostgreSQL writes such a batch by COPY, as text)
    # whose values hold what COPY's text escapes: tabs, newlines, backslashes,
    # its NULL marker, and values the batch's jobs share or not
    odd = ["tab\tnew\nline\rcr", "back\\slash", "\\N", "", "ünïcødé ✓ 𝄞", 'q"uote', None, 10**18, 2.5]
    batch = [replace(new(task=f"t{i % 3}", queue=("default", "q\t2")[i % 2], priority=i % 4, args=[odd[i % len(odd)], i],
                         stage=(None, "s\\1")[i % 2], owner=(None, "o\tw", "\\N")[i % 3],
                         dependencies=(("d\n1", "d2"), ())[i % 2]),
                     kwargs=({}, {"k\t": odd[i % len(odd)]})[i % 2])
             for i in range(300)]
    # When they are enqueued in one batch
    made = [r.job for r in store.jobs_insert(jobs=batch)]
    # Then each is stored as given, queued and due at its creation, with its creation event in the batch's order
    stored = [store.job_get(job_id=job.id) for job in batch]
    assert made == stored
    for job, given in zip(stored, batch, strict=True):
        assert (job.task, job.queue, job.priority, job.args, job.kwargs, job.owner, job.dependencies) == (
            given.task, given.queue, given.priority, given.args, given.kwargs, given.owner, list(given.dependencies))
        assert job.stage == given.stage or (given.stage is None and job.stage == given.task)
        assert job.status is Status.QUEUED and job.run_at == job.created_at == made[0].created_at
    events = [store.job_events_list(job_id=job.id) for job in batch]
    assert all([e.to_status for e in each] == [Status.QUEUED] for each in events)
    assert [each[0].id for each in events] == sorted(each[0].id for each in events)


def test_enqueue_claim_and_complete_answer_with_the_job_as_stored(store: Store) -> None:
    # Given a job with every field enqueue sets: a key, an owner, a stage, a dependency
    request = NewJob(
        id=uuid.uuid4(), task="t", queue="default", args=[1, "a"], kwargs={"k": {"n": [1.5]}},
        priority=3, max_attempts=4, owner="acme", stage="fetch", dependencies=("llm",),
        key=JobKey("order-1", 2, "fp"),
    )
    # Then what enqueue answers is the stored job
    created = store.jobs_insert(jobs=[request])[0].job
    assert created == store.job_get(job_id=request.id)
    # And so is what a claim answers, also once the job has a checkpoint, a
    # past error and a stage's attempts (stores build claimed jobs by position)
    claimed = claim_one(store)
    assert claimed == store.job_get(job_id=request.id)
    store.stages_save(items=[StageDone(lease=claimed.lease, stage="fetch", output={"page": 1},
                                       stage_attempts={"fetch": 1}, next_stage="parse")])
    applied(store.jobs_finish([RetryLater(lease=claimed.lease, delay=timedelta(0), error_code="E",
                                       error_message="flaky", stage_attempts={"parse": 1})]))
    again = wait_for(lambda: claim(store), timeout=5)[0]
    assert again == store.job_get(job_id=request.id)
    assert (again.stage, again.checkpoint, again.last_error_code) == ("parse", {"fetch": {"page": 1}}, "E")
    assert again.stage_attempts == {"parse": 1} and again.attempts == 2
    # And a completion stores the result with everything else kept
    assert applied(store.jobs_finish([Completion(lease=again.lease, result={"ok": True})])) == {again.lease}
    done = store.job_get(job_id=request.id)
    assert (done.status, done.result, done.finished_at is not None) == (Status.SUCCEEDED, {"ok": True}, True)
    assert (done.checkpoint, done.owner, done.idempotency_key, done.version) == (
        again.checkpoint, "acme", "order-1", 2)


def test_claim_honours_queues_and_limit(store: Store) -> None:
    store.jobs_insert(jobs=[new(queue="a") for _ in range(3)] + [new(queue="b")])
    assert len(claim(store, 2, queues=["a"])) == 2
    assert [j.queue for j in claim(store, 10, queues=["b", "c"])] == ["b"]
    assert len(claim(store, 10, queues=["a", "b"])) == 1


def test_a_claim_leases_the_job_from_the_database_clock(store: Store) -> None:
    (job,) = [r.job for r in store.jobs_insert(jobs=[new()])]
    before = store.now()
    claimed = claim_one(store, ttl=timedelta(seconds=60))
    assert claimed.id == job.id
    assert claimed.status is Status.RUNNING and claimed.attempts == 1
    assert claimed.lease_owner == "w-test" and claimed.lease_token is not None
    assert before + timedelta(seconds=59) <= claimed.lease_expires_at <= store.now() + timedelta(seconds=61)
    assert claimed.started_at is not None
    events = assert_history(store, job.id)
    assert events[-1].meta == {"worker": "w-test"} and events[-1].attempt == 1
    assert claim(store) == []


def test_concurrent_claims_never_share_a_job(store: Store, reopen: Callable[[Store], Store]) -> None:
    store.jobs_insert(jobs=[new() for _ in range(120)])
    handles = [store] + [reopen(store) for _ in range(3)]
    taken: list[list[uuid.UUID]] = [[] for _ in handles]

    def drain(i: int) -> None:
        while batch := handles[i].jobs_claim(
            queues=["default"], limit=7, worker_id=f"w{i}", lease_ttl=TTL
        ):
            taken[i].extend(j.id for j in batch)

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(len(handles))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    everything = [job_id for ids in taken for job_id in ids]
    assert len(everything) == 120 and len(set(everything)) == 120
    for handle in handles[1:]:
        if handle is not store:
            handle.close()


def test_every_lease_token_is_new(store: Store) -> None:
    store.jobs_insert(jobs=[new(max_attempts=5)])
    tokens = set()
    for _ in range(3):
        job = claim_one(store)
        tokens.add(job.lease_token)
        assert applied(store.jobs_finish([RetryLater(job.lease, timedelta(0), "E", "again")]))
    assert len(tokens) == 3


# -- fenced writes ------------------------------------------------------------------


def test_heartbeat_extends_only_held_leases(store: Store) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store, ttl=timedelta(seconds=5))
    forged = Lease(job.id, uuid.uuid4())
    assert store.leases_extend(leases=[forged], lease_ttl=timedelta(hours=1)) == set()
    assert store.leases_extend(leases=[job.lease], lease_ttl=timedelta(hours=1)) == {job.lease}
    extended = store.job_get(job_id=job.id)
    assert extended.lease_expires_at > job.lease_expires_at + timedelta(minutes=50)


def test_complete_is_fenced_on_the_lease(store: Store) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    # Given a write with someone else's token: nothing changes
    assert applied(store.jobs_finish([Completion(Lease(job.id, uuid.uuid4()), {"x": 1})])) == set()
    assert store.job_get(job_id=job.id).status is Status.RUNNING
    # When the holder completes
    assert applied(store.jobs_finish([Completion(job.lease, {"x": 1}, {"duration_ms": 5})])) == {job.lease}
    # Then the job succeeded, keeps its result and history, and a repeat does nothing
    done = store.job_get(job_id=job.id)
    assert done.status is Status.SUCCEEDED and done.result == {"x": 1}
    assert done.finished_at is not None
    assert applied(store.jobs_finish([Completion(job.lease, {"x": 2})])) == set()
    assert store.job_get(job_id=job.id).result == {"x": 1}
    assert assert_history(store, job.id)[-1].meta == {"duration_ms": 5}
    assert claim(store) == []


def test_batched_completion_applies_each_held_lease(store: Store) -> None:
    store.jobs_insert(jobs=[new() for _ in range(5)])
    jobs = claim(store)
    stale = Completion(Lease(jobs[0].id, uuid.uuid4()), None)
    items = [Completion(j.lease, {"n": i}) for i, j in enumerate(jobs[1:])] + [stale]
    # The same completion twice in a batch moves the job once
    items.append(items[0])
    assert applied(store.jobs_finish(items)) == {j.lease for j in jobs[1:]}
    assert count_jobs(store)[Status.SUCCEEDED] == 4
    assert store.job_get(job_id=jobs[0].id).status is Status.RUNNING
    assert [e.to_status for e in assert_history(store, jobs[1].id)][-1:] == [Status.SUCCEEDED]
    assert len(store.job_events_list(job_id=jobs[1].id)) == 3


def test_retry_requeues_for_later_and_keeps_the_last_error(store: Store) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    item = RetryLater(job.lease, timedelta(milliseconds=400), "UPSTREAM_5XX", "503 from upstream")
    assert applied(store.jobs_finish([item])) == {job.lease}
    retried = store.job_get(job_id=job.id)
    assert retried.status is Status.QUEUED
    assert (retried.last_error_code, retried.error_code) == ("UPSTREAM_5XX", None)
    assert retried.run_at >= store.now() + timedelta(milliseconds=200)
    # Not before its run_at
    assert claim(store) == []
    again = wait_for(lambda: claim(store), timeout=5)[0]
    assert again.attempts == 2
    event = assert_history(store, job.id)[2]
    assert event.meta["error_code"] == "UPSTREAM_5XX" and event.meta["delay_ms"] == 400
    assert applied(store.jobs_finish([item])) == set()  # the old lease is gone


def test_fail_records_the_error(store: Store) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    assert applied(store.jobs_finish([FailNow(job.lease, "NOT_PDF", "Only PDF files are supported.")])) == {job.lease}
    failed = store.job_get(job_id=job.id)
    assert failed.status is Status.FAILED
    assert (failed.error_code, failed.error_message) == ("NOT_PDF", "Only PDF files are supported.")
    assert assert_history(store, job.id)[-1].meta["error_code"] == "NOT_PDF"
    assert applied(store.jobs_finish([FailNow(job.lease, "X", "y")])) == set()


def test_requeue_on_shutdown_gives_the_dispatch_back(store: Store) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    assert applied(store.jobs_finish([Requeue(job.lease)])) == {job.lease}
    requeued = store.job_get(job_id=job.id)
    assert requeued.status is Status.QUEUED and requeued.attempts == 0
    assert assert_history(store, job.id)[-1].meta == {"reason": "shutdown"}
    assert claim_one(store).attempts == 1
    assert store.jobs_finish([Requeue(job.lease)]) == []


# -- reclaim -----------------------------------------------------------------------------


def test_an_expired_lease_is_reclaimed_and_its_holder_fenced_out(store: Store) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store, ttl=timedelta(milliseconds=300))
    assert reclaim(store) == []  # not yet expired
    assert wait_for(lambda: reclaim(store), timeout=5) == [job.id]
    reclaimed = store.job_get(job_id=job.id)
    assert reclaimed.status is Status.QUEUED and reclaimed.attempts == 1
    assert assert_history(store, job.id)[-1].meta == {"reason": "lease_expired", "worker": "w-test"}
    # The old holder's writes now change nothing
    assert applied(store.jobs_finish([Completion(job.lease, "late")])) == set()
    assert store.leases_extend(leases=[job.lease], lease_ttl=TTL) == set()
    assert claim_one(store).attempts == 2


def test_an_expired_lease_with_no_attempt_left_fails_the_job(store: Store) -> None:
    store.jobs_insert(jobs=[new(max_attempts=1)])
    job = claim_one(store, ttl=timedelta(milliseconds=300))
    assert wait_for(lambda: reclaim(store), timeout=5) == [job.id]
    failed = store.job_get(job_id=job.id)
    assert failed.status is Status.FAILED and failed.error_code == LEASE_EXPIRED
    assert_history(store, job.id)


# -- read ------------------------------------------------------------------------------


def test_list_and_count_see_active_and_finished_jobs(store: Store) -> None:
    store.jobs_insert(jobs=[new(task="a"), new(task="a", queue="other"), new(task="b")])
    job = claim_one(store)
    applied(store.jobs_finish([Completion(job.lease, None)]))
    assert len(store.jobs_page(where=JobFilter())) == 3
    assert {j.task for j in store.jobs_page(where=JobFilter(task="a"))} == {"a"}
    assert [j.queue for j in store.jobs_page(where=JobFilter(queue="other"))] == ["other"]
    assert [j.id for j in store.jobs_page(where=JobFilter(statuses=(Status.SUCCEEDED,)))] == [job.id]
    assert len(store.jobs_page(where=JobFilter(statuses=(Status.QUEUED, Status.SUCCEEDED)), limit=2)) == 2
    counts = count_jobs(store)
    assert counts[Status.QUEUED] == 2 and counts[Status.SUCCEEDED] == 1
    assert store.job_get(job_id=uuid.uuid4()) is None


def test_a_store_handed_to_the_suite_is_migrated(store: Store) -> None:
    assert store.migrate() == []  # nothing pending: migrating again changes nothing
    assert store.schema_current()
