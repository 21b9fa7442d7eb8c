"""The store's side of the outbox, the schedules, the write-phase lease check
and wake-ups, on every store (until now only exercised through workers)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta

from redrive.core.job import Lease
from redrive.core.outbox import OutboxChange, OutboxStatus, Step, next_step
from redrive.core.transitions import Completion
from redrive.store.port import ANY_QUEUE, Store
from redrive.testing import applied, claim_one, new

KEY = '["cl-9","ann@example.com",4]'


def test_an_outbox_row_is_created_once_and_fenced_on_the_lease(store: Store) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    forged = Lease(job.id, uuid.uuid4())
    # A write under a lease that is not held creates nothing
    assert store.outbox_open(lease=forged, key=KEY, token="tok") is None
    assert store.outbox_page().items == []
    # The holder creates the row pending; opening it again returns the same row
    row = store.outbox_open(lease=job.lease, key=KEY, token="tok")
    assert (row.status, row.provider_id, row.notified_at, row.sends, row.job_id) == (
        OutboxStatus.PENDING, None, None, 0, job.id)
    assert store.outbox_open(lease=job.lease, key=KEY, token="another") == row
    assert next_step(row) is Step.SEND


def test_outbox_changes_follow_send_then_mark(store: Store) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    store.outbox_open(lease=job.lease, key=KEY, token="tok")
    sending = store.outbox_update(lease=job.lease, key=KEY, change=OutboxChange(OutboxStatus.SENDING,
                                                                                 send_started=True))
    assert (sending.status, sending.sends) == (OutboxStatus.SENDING, 1)
    assert next_step(sending) is Step.RECONCILE  # a send may have happened: look it up first
    sent = store.outbox_update(lease=job.lease, key=KEY, change=OutboxChange(
        OutboxStatus.SENT, provider_id="msg-1", notified=True))
    assert (sent.status, sent.provider_id, sent.sends) == (OutboxStatus.SENT, "msg-1", 1)
    assert sent.notified_at is not None and next_step(sent) is Step.SKIP
    # Clearing: "" clears the provider id, notified=False clears notified_at
    cleared = store.outbox_update(lease=job.lease, key=KEY, change=OutboxChange(
        OutboxStatus.PENDING, provider_id="", notified=False, reconciled=True))
    assert (cleared.provider_id, cleared.notified_at, cleared.reconciliations) == (None, None, 1)
    # Once the lease is gone, nothing changes
    applied(store.jobs_finish([Completion(job.lease, None)]))
    assert store.outbox_update(lease=job.lease, key=KEY, change=OutboxChange(OutboxStatus.FAILED)) is None
    assert store.outbox_page().items[0].status is OutboxStatus.PENDING
    # An unknown key is not created by an update
    store.jobs_insert(jobs=[new()])
    other = claim_one(store)
    assert store.outbox_update(lease=other.lease, key='["nope"]', change=OutboxChange(OutboxStatus.SENT)) is None


def test_a_schedule_checkpoint_starts_at_first_sight_and_only_moves_forward(store: Store) -> None:
    now = store.now()
    assert store.schedule_checkpoint(name="offers", now=now) == now
    # a second scheduler seeing it later keeps the first one's start
    assert store.schedule_checkpoint(name="offers", now=now + timedelta(hours=1)) == now
    store.schedule_advance(name="offers", to=now + timedelta(minutes=5))
    store.schedule_advance(name="offers", to=now + timedelta(minutes=2))  # never back
    assert store.schedule_checkpoint(name="offers", now=now) == now + timedelta(minutes=5)


def test_the_lease_check_of_a_write_phase(store: Store) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    assert store.lease_check(lease=job.lease)
    assert not store.lease_check(lease=Lease(job.id, uuid.uuid4()))
    applied(store.jobs_finish([Completion(job.lease, None)]))
    assert not store.lease_check(lease=job.lease)


def test_an_enqueue_wakes_a_subscriber_with_its_queue(store: Store, reopen: Callable[[Store], Store]) -> None:
    heard: list[str] = []
    woken = threading.Event()

    def on_wake(queue: str) -> None:
        heard.append(queue)
        woken.set()

    # A second handle, as another worker process holds: it hears of the first one's jobs
    listener = reopen(store)
    unsubscribe = listener.wakeups_subscribe(on_wake)
    assert unsubscribe is not None
    try:
        # The listener starts in a thread of the store's: enqueue until it hears one
        deadline = time.monotonic() + 5
        while True:
            store.jobs_insert(jobs=[new(queue="email")])
            if woken.wait(0.2):
                break
            assert time.monotonic() < deadline, "no wake-up within 5 s"
        # the queue, or ANY_QUEUE from a store that cannot tell which
        assert set(heard) <= {"email", ANY_QUEUE} and heard
    finally:
        unsubscribe()
        if listener is not store:
            listener.close()


def test_a_job_s_end_is_told_to_whoever_waits_for_it(store: Store, reopen: Callable[[Store], Store]) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    told = threading.Event()
    waiting = reopen(store)  # as a caller in another process would wait
    stop = waiting.finishes_subscribe(job_id=job.id, on_finish=told.set)
    try:
        assert not told.is_set()
        applied(store.jobs_finish([Completion(job.lease, {"ok": True})]))
        assert told.wait(5), "the job ended and nobody was told within 5 s"
    finally:
        stop()
