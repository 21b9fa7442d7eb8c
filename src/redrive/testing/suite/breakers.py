"""Breakers shared through the store, and the claim's side of hold-queue, on every store."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from redrive.core.breaker import BreakerPolicy, Call, State, force_open, record
from redrive.core.job import NewJob
from redrive.core.limits import Limits, Rule
from redrive.core.states import Status
from redrive.core.transitions import Requeue
from redrive.store.port import Store
from redrive.testing import applied, claim, claim_one, wait_for

POLICY = BreakerPolicy(window_calls=100, min_calls=100)


def needing(*dependencies: str) -> NewJob:
    return NewJob(id=uuid.uuid4(), task="t", queue="default", args=[], kwargs={}, priority=0,
                  max_attempts=3, dependencies=dependencies)


def test_updates_from_many_workers_are_never_lost(store: Store, reopen: Callable[[Store], Store]) -> None:
    others = [reopen(store) for _ in range(4)]

    def fail_five(handle: Store) -> None:
        for _ in range(5):
            handle.breaker_update(name="gateway", change=lambda b, now: record(
                b, POLICY, [Call(now, False)], now))

    threads = [threading.Thread(target=fail_five, args=(h,)) for h in others]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    breakers, now = store.breakers_list()
    assert len(breakers["gateway"].window) == 20 and breakers["gateway"].state is State.CLOSED
    assert now > 0
    for handle in others:
        if handle is not store:
            handle.close()


def test_state_changes_are_events_with_who_made_them(store: Store) -> None:
    opened = store.breaker_update(name="gw", change=lambda b, now: force_open(b, now), by="ops")
    assert opened.state is State.OPEN and opened.forced
    again = store.breaker_update(name="gw", change=lambda b, now: replace(b, probed_at=now))
    assert again.state is State.OPEN and again.probed_at is not None
    (event,) = store.breaker_events_list(name="gw")
    assert (event.from_state, event.to_state, event.reason, event.by) == ("closed", "open", "forced open", "ops")
    assert store.breakers_list()[0]["gw"].forced
    assert store.breaker_events_list(name="other") == []


def test_the_claim_skips_jobs_that_need_a_blocked_dependency(store: Store) -> None:
    gw, plain, both = [r.job for r in store.jobs_insert(jobs=[needing("gateway"), needing(), needing("gateway", "llm")])]
    assert store.job_get(job_id=both.id).dependencies == ["gateway", "llm"]
    taken = claim(store, blocked=["llm"])
    assert {j.id for j in taken} == {gw.id, plain.id}
    assert {j.id for j in claim(store, blocked=["gateway"])} == set()
    assert [j.id for j in claim(store)] == [both.id]


def test_a_claim_with_limits_skips_only_the_jobs_that_need_a_blocked_dependency(store: Store) -> None:
    # (a claim with limits reads its candidates apart: the same filter there)
    gw, plain = [r.job for r in store.jobs_insert(jobs=[needing("gateway"), needing()])]
    limits = Limits({"queue:default": Rule(concurrency=5)})
    assert [j.id for j in claim(store, blocked=["gateway"], limits=limits)] == [plain.id]
    assert [j.id for j in claim(store, limits=limits)] == [gw.id]


def test_a_held_job_goes_back_without_spending_an_attempt(store: Store) -> None:
    store.jobs_insert(jobs=[needing("gateway")])
    job = claim_one(store)
    meta = {"reason": "breaker_open", "dependency": "gateway"}
    assert applied(store.jobs_finish([Requeue(job.lease, timedelta(milliseconds=300), meta=meta)])) == {job.lease}
    held = store.job_get(job_id=job.id)
    assert (held.status, held.attempts) == (Status.QUEUED, 0)
    assert store.job_events_list(job_id=job.id)[-1].meta == meta
    assert claim(store) == []  # not before the delay
    assert wait_for(lambda: claim(store), timeout=5)[0].attempts == 1
