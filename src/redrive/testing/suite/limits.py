"""Limits shared through the store (``core/limits.py``): a claim with limits
takes only the due jobs that fit, and what it took counts for every later
claim, from any worker."""

from __future__ import annotations

from datetime import timedelta

from redrive.core.limits import Limits, Rate, Rule
from redrive.core.transitions import Completion
from redrive.store.port import Store
from redrive.testing import Clock, applied, claim, new

EMAIL = Limits({"queue:email": Rule(concurrency=2)})


def test_a_queue_concurrency_limit_counts_running_jobs_of_every_claim(store: Store, reopen) -> None:
    store.jobs_insert(jobs=[new(queue="email") for _ in range(5)])
    other = reopen(store)  # another worker's handle on the same database
    first = claim(store, 10, queues=["email"], limits=EMAIL)
    assert len(first) == 2
    assert claim(other, 10, queues=["email"], limits=EMAIL) == []
    applied(store.jobs_finish([Completion(first[0].lease, None)]))
    assert len(claim(other, 10, queues=["email"], limits=EMAIL)) == 1
    assert len(claim(store, 10, queues=["email"])) == 2  # a claim without limits is not held back


def test_a_rate_counts_starts_in_any_window_by_the_store_clock(timed_store: Store, clock: Clock) -> None:
    limits = Limits({"queue:email": Rule(rate=Rate(3, per=timedelta(seconds=10)))})
    timed_store.jobs_insert(jobs=[new(queue="email") for _ in range(8)])
    started = claim(timed_store, 10, queues=["email"], limits=limits)
    assert len(started) == 3
    applied(timed_store.jobs_finish([Completion(job.lease, None) for job in started]))  # finished still counts
    clock.advance(timedelta(seconds=9))
    assert claim(timed_store, 10, queues=["email"], limits=limits) == []
    clock.advance(timedelta(seconds=1))
    assert len(claim(timed_store, 10, queues=["email"], limits=limits)) == 3


def test_a_claim_under_other_rules_keeps_a_rates_window(timed_store: Store, clock: Clock) -> None:
    # A worker on another queue, whose rule keeps no window, must not forget
    # the starts a rate counts (each claim carries only its own queues' rules)
    rate = Limits({"queue:email": Rule(rate=Rate(3, per=timedelta(seconds=10)))})
    timed_store.jobs_insert(jobs=[new(queue="email") for _ in range(6)] + [new(queue="pdf") for _ in range(2)])
    started = claim(timed_store, 10, queues=["email"], limits=rate)
    applied(timed_store.jobs_finish([Completion(job.lease, None) for job in started]))
    clock.advance(timedelta(seconds=5))
    assert len(claim(timed_store, 10, queues=["pdf"], limits=Limits({"queue:pdf": Rule(concurrency=1)}))) == 1
    assert claim(timed_store, 10, queues=["email"], limits=rate) == []
    clock.advance(timedelta(seconds=5))
    assert len(claim(timed_store, 10, queues=["email"], limits=rate)) == 3


def test_a_rate_per_owner_lets_each_owner_start_its_share(timed_store: Store, clock: Clock) -> None:
    limits = Limits({"owner:llm": Rule(rate=Rate(2, per=timedelta(minutes=1)))})
    timed_store.jobs_insert(jobs=[new(queue="llm", owner="ann") for _ in range(5)])
    timed_store.jobs_insert(jobs=[new(queue="llm", owner="bob") for _ in range(5)])
    taken = claim(timed_store, 10, queues=["llm"], limits=limits)
    assert sorted(job.owner for job in taken) == ["ann", "ann", "bob", "bob"]  # ann's backlog hides nobody


def test_a_dependency_rate_holds_only_the_jobs_that_need_it(store: Store) -> None:
    limits = Limits({"dependency:gateway": Rule(rate=Rate(1, per=timedelta(hours=1)))})
    store.jobs_insert(jobs=[new(dependencies=("gateway",)) for _ in range(3)] + [new() for _ in range(2)])
    taken = claim(store, 10, limits=limits)
    assert sorted(tuple(job.dependencies) for job in taken) == [(), (), ("gateway",)]
