"""Retention: old history goes with everything that hangs off it, on every store;
what is active, recent or still awaiting an operator stays."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from redrive import Actor, App, ConfigError, JobRequest
from redrive.core.job import DeadLetterFilter
from redrive.core.states import Status
from redrive.core.transitions import Completion
from redrive.store.port import Store
from redrive.testing import Clock, applied, claim_one, count_jobs, fail, letter_of, new, revive

AGE = timedelta(days=30)  # any age: the tests move the stores' clock past it
OPERATOR = Actor.operator("test")


def succeed(store: Store) -> object:
    job = claim_one(store)
    assert applied(store.jobs_finish([Completion(job.lease, {"ok": True})])) == {job.lease}
    return job.id


def test_only_history_older_than_the_age_goes_with_its_events_and_handled_letters(timed_store: Store, clock: Clock) -> None:
    store = timed_store
    store.jobs_insert(jobs=[new(task="old") for _ in range(2)])
    old = [succeed(store) for _ in range(2)]
    store.jobs_insert(jobs=[new(task="failed")])
    failed = claim_one(store)
    fail(store, failed)
    store.jobs_insert(jobs=[new(task="handled")])
    handled = claim_one(store)
    fail(store, handled)
    letter = letter_of(store, handled.id)
    assert revive(store, handled.id, "replay", by="ops", dead_letter_id=letter.id)
    assert succeed(store) == handled.id
    clock.advance(AGE * 1.5)
    store.jobs_insert(jobs=[new(task="recent")])
    recent = succeed(store)
    store.jobs_insert(jobs=[new(task="waiting")])

    assert store.jobs_prune(older_than=AGE) == 3  # two old successes and the replayed one
    for gone in (*old, handled.id):
        assert store.job_get(job_id=gone) is None
        assert store.job_events_list(job_id=gone) == []
    assert store.dead_letters_page(where=DeadLetterFilter(state="replayed")).items == []
    # the failed job awaits an operator: it and its open letter stay
    assert store.job_get(job_id=failed.id).status is Status.FAILED
    assert letter_of(store, failed.id).replayed_at is None
    assert store.job_events_list(job_id=failed.id)
    assert store.job_get(job_id=recent).status is Status.SUCCEEDED
    counts = count_jobs(store)
    assert (counts.get(Status.QUEUED), counts.get(Status.SUCCEEDED), counts.get(Status.FAILED)) == (1, 1, 1)
    assert store.jobs_prune(older_than=AGE) == 0


def test_pruning_goes_oldest_first_in_batches(timed_store: Store, clock: Clock) -> None:
    store = timed_store
    store.jobs_insert(jobs=[new() for _ in range(5)])
    finished = []
    for _ in range(5):
        finished.append(succeed(store))
        clock.advance(timedelta(milliseconds=10))
    clock.advance(AGE * 1.5)
    assert store.jobs_prune(older_than=AGE, limit=2) == 2
    assert [store.job_get(job_id=i) is None for i in finished] == [True, True, False, False, False]
    assert store.jobs_prune(older_than=AGE, limit=2) == 2
    assert store.jobs_prune(older_than=AGE, limit=2) == 1


def test_a_pruned_jobs_idempotency_key_can_be_used_afresh(timed_store: Store, clock: Clock) -> None:
    store = timed_store
    app = App(store=store)
    app.task(lambda n: None, name="mail")
    first = app.enqueue("mail", args=[1], idempotency_key="welcome:ann").job
    succeed(store)
    assert app.enqueue("mail", args=[1], idempotency_key="welcome:ann").duplicate
    clock.advance(AGE * 1.5)
    assert app.admin(OPERATOR).prune(AGE, batch=1) == 1
    again = app.enqueue("mail", args=[1], idempotency_key="welcome:ann")
    assert not again.duplicate and again.job.id == first.id  # the key's id, a new run
    assert app.client.job(first.id).status is Status.QUEUED


def test_prune_refuses_an_age_it_cannot_use(timed_store: Store, clock: Clock) -> None:
    store = timed_store
    app = App(store=store)
    store.jobs_insert(jobs=[new()])
    kept = succeed(store)
    clock.advance(AGE * 1.5)
    with pytest.raises(ConfigError, match="positive age"):
        app.admin(OPERATOR).prune(app.settings.job_retention)  # no job_retention setting: history is kept forever
    with pytest.raises(ConfigError, match="positive age"):
        app.admin(OPERATOR).prune(timedelta(0))
    with pytest.raises(ConfigError, match="batch"):
        app.admin(OPERATOR).prune(AGE, batch=0)
    assert store.job_get(job_id=kept).status is Status.SUCCEEDED


def test_app_prune_works_through_every_batch(timed_store: Store, clock: Clock) -> None:
    store = timed_store
    app = App(store=store)
    app.task(lambda: None, name="t")
    app.enqueue_many([JobRequest("t")] * 7)
    for _ in range(7):
        succeed(store)
    clock.advance(AGE * 1.5)
    assert app.admin(OPERATOR).prune(AGE, batch=3) == 7
    assert not count_jobs(store).get(Status.SUCCEEDED)


def test_finished_jobs_picked_by_id_go_at_once_and_active_ones_stay(timed_store: Store) -> None:
    store = timed_store
    # One at a time: a claim takes any due job, and each must be the one meant
    store.jobs_insert(jobs=[new(task="done")])
    done = succeed(store)
    store.jobs_insert(jobs=[new(task="broken")])
    broken = claim_one(store)
    fail(store, broken)  # its dead letter is open: an operator's delete takes it too
    waiting = store.jobs_insert(jobs=[new(task="waiting")])[0].job.id
    stranger = uuid.uuid4()
    gone = store.jobs_delete(job_ids=[done, broken.id, waiting, stranger])
    assert sorted(gone) == sorted([done, broken.id])
    assert store.job_get(job_id=done) is None and store.job_get(job_id=broken.id) is None
    assert store.job_events_list(job_id=done) == [] and store.dead_letters_page(
        where=DeadLetterFilter(job_id=broken.id)).items == []
    assert store.job_get(job_id=waiting).status is Status.QUEUED
    assert store.jobs_delete(job_ids=[done]) == [] and store.jobs_delete(job_ids=[]) == []
