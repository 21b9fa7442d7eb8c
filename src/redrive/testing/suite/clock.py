"""Every store can run on a clock a test moves (``clock=``): due times, lease
expiry and dead-letter ages follow it, with no sleeping."""

from __future__ import annotations

from datetime import timedelta

from redrive.core.job import DeadLetterFilter
from redrive.core.states import Status
from redrive.core.transitions import Completion, FailNow
from redrive.store.port import Store
from redrive.testing import Clock, applied, claim, claim_one, new, reclaim


def test_due_times_follow_the_store_clock(timed_store: Store, clock: Clock) -> None:
    (job,) = [r.job for r in timed_store.jobs_insert(jobs=[new(delay=timedelta(hours=1))])]
    assert job.status is Status.SCHEDULED and job.run_at == clock.now + timedelta(hours=1)
    assert timed_store.now() == clock.now
    clock.advance(timedelta(minutes=59))
    assert claim(timed_store) == []
    clock.advance(timedelta(minutes=1))
    assert claim_one(timed_store).id == job.id


def test_leases_expire_by_the_store_clock(timed_store: Store, clock: Clock) -> None:
    timed_store.jobs_insert(jobs=[new()])
    job = claim_one(timed_store, ttl=timedelta(seconds=30))
    assert job.lease_expires_at == clock.now + timedelta(seconds=30)
    clock.advance(timedelta(seconds=29))
    assert reclaim(timed_store) == []
    clock.advance(timedelta(seconds=2))
    assert reclaim(timed_store) == [job.id]
    assert timed_store.job_get(job_id=job.id).status is Status.QUEUED


def test_dead_letter_ages_follow_the_store_clock(timed_store: Store, clock: Clock) -> None:
    timed_store.jobs_insert(jobs=[new()])
    applied(timed_store.jobs_finish([FailNow(claim_one(timed_store).lease, "NOT_FOUND", "gone")]))
    clock.advance(timedelta(hours=2))
    assert len(timed_store.dead_letters_page(where=DeadLetterFilter(older_than=timedelta(hours=1)))) == 1
    assert len(timed_store.dead_letters_page(where=DeadLetterFilter(newer_than=timedelta(hours=1)))) == 0


def test_a_holder_past_its_lease_writes_nothing_even_before_the_reclaim(timed_store: Store, clock: Clock) -> None:
    # Given a job whose lease ran out, and that no reclaim has taken yet
    timed_store.jobs_insert(jobs=[new(), new()])
    late, on_time = claim(timed_store, limit=2, ttl=timedelta(seconds=30))
    clock.advance(timedelta(seconds=29))
    assert timed_store.leases_extend(leases=[on_time.lease], lease_ttl=timedelta(seconds=30)) == {on_time.lease}
    clock.advance(timedelta(seconds=2))
    # Then its holder can neither extend it, save a stage, check it nor end the job
    assert timed_store.leases_extend(leases=[late.lease, on_time.lease], lease_ttl=timedelta(seconds=30)) \
        == {on_time.lease}
    assert not timed_store.lease_check(lease=late.lease)
    assert applied(timed_store.jobs_finish([Completion(late.lease, "late"), Completion(on_time.lease, "ok")])) \
        == {on_time.lease}
    # And the reclaim takes it back, its attempt spent
    assert reclaim(timed_store) == [late.id]
    assert timed_store.job_get(job_id=late.id).status is Status.QUEUED
