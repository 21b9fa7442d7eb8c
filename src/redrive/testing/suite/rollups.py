"""Rollups: every ending a store writes adds to its minute's rollup in the
same write; the compaction folds them without losing a count; they outlive
the jobs' history."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from redrive.core.rollups import KEEP, MINUTES_FOR, UNTIMED, WAIT, bucket_of
from redrive.core.transitions import Cancellation, Completion, FailNow, Requeue, RetryLater
from redrive.store.port import Store
from redrive.testing import Clock, applied, claim, claim_one, new

TIMED = {"duration_ms": 7, "wait_ms": 30}


def _sums(store: Store, by: str = "task", **options: object) -> Counter[tuple[str, str, int]]:
    out: Counter[tuple[str, str, int]] = Counter()
    for row in store.rollups_read(since=store.now() - timedelta(days=40), by=by, **options):  # type: ignore[arg-type]
        out[(row.key, row.kind, row.bucket)] += row.n
    return out


def test_each_ending_adds_to_its_minute_by_kind_and_bucket(store: Store) -> None:
    store.jobs_insert(jobs=[new(queue="a", task="convert") for _ in range(5)] + [new(queue="b", task="mail")])
    ok1, ok2, failed, retried, cancelled = claim(store, 5, queues=["a"])
    requeued = claim_one(store, queues=["b"])
    applied(store.jobs_finish([
        Completion(ok1.lease, None, TIMED), Completion(ok2.lease, None, {"duration_ms": 400, "wait_ms": 30}),
        FailNow(failed.lease, "NOT_PDF", "not a PDF", {"duration_ms": 7}),
        RetryLater(retried.lease, timedelta(seconds=5), "UPSTREAM_5XX", "503", {"duration_ms": 2500}),
        Cancellation(cancelled.lease, by="ops:ana", meta=TIMED),
        Requeue(requeued.lease, timedelta(0)),  # handed back without an attempt spent: not an ending
    ]))
    # a write whose lease no longer holds adds nothing
    assert store.jobs_finish([Completion(ok1.lease, None, TIMED)]) == []

    assert _sums(store) == {
        ("convert", "succeeded", bucket_of(7)): 1, ("convert", "succeeded", bucket_of(400)): 1,
        ("convert", WAIT, bucket_of(30)): 3,
        ("convert", "failed", bucket_of(7)): 1,
        ("convert", "retried", bucket_of(2500)): 1,
        ("convert", "cancelled", bucket_of(7)): 1,
    }
    # per queue, and without the buckets: what the overview's counts read
    assert _sums(store, by="queue", timed=False) == {
        ("a", "succeeded", UNTIMED): 2, ("a", "failed", UNTIMED): 1, ("a", "retried", UNTIMED): 1,
        ("a", "cancelled", UNTIMED): 1}
    # slots an hour wide add the minutes up
    hourly = store.rollups_read(since=store.now() - timedelta(hours=2), slot=timedelta(hours=1), by="queue")
    assert {r.at.minute for r in hourly} == {0} and sum(r.n for r in hourly if r.kind != WAIT) == 5
    rows = store.rollups_read(since=store.now() - timedelta(minutes=1))
    assert rows and all(r.at.second == 0 and r.at.utcoffset() == timedelta(0) for r in rows)
    assert all(store.now() - timedelta(minutes=1) < r.at <= store.now() for r in rows)
    assert store.rollups_read(since=store.now() + timedelta(minutes=1)) == []


def test_a_job_taken_back_from_an_expired_lease_counts_untimed(timed_store: Store, clock: Clock) -> None:
    store = timed_store
    store.jobs_insert(jobs=[new(task="slow", max_attempts=1), new(task="slow", max_attempts=2)])
    claim(store, 2, ttl=timedelta(seconds=30))
    clock.advance(timedelta(minutes=1))
    assert len(store.jobs_reclaim()) == 2
    assert _sums(store) == {("slow", "failed", UNTIMED): 1, ("slow", "retried", UNTIMED): 1}


def test_compaction_folds_minutes_into_hours_and_keeps_every_count(timed_store: Store, clock: Clock) -> None:
    store = timed_store
    clock.advance(timedelta(minutes=60 - clock().minute, seconds=-clock().second))  # start on the hour
    for _ in range(90):  # 90 minutes, one ending a minute, alternating outcome
        store.jobs_insert(jobs=[new(task="tick")])
        job = claim_one(store)
        end = Completion(job.lease, None, TIMED) if clock().minute % 2 else FailNow(job.lease, "X", "x", TIMED)
        applied(store.jobs_finish([end]))
        clock.advance(timedelta(minutes=1))
    before = _sums(store)
    assert sum(n for (_, kind, _), n in before.items() if kind != WAIT) == 90
    store.rollups_compact()  # only shards (PostgreSQL's) are added together yet: minutes stay
    assert _sums(store) == before
    assert len({r.at for r in store.rollups_read(since=store.now() - timedelta(days=2))}) == 90

    clock.advance(MINUTES_FOR)
    store.rollups_compact()
    assert _sums(store) == before
    rows = store.rollups_read(since=store.now() - timedelta(days=2))
    assert {r.at.minute for r in rows} == {0} and len({r.at for r in rows}) == 2  # two hours
    store.rollups_compact()  # again: nothing moves twice
    assert _sums(store) == before

    clock.advance(KEEP)
    store.rollups_compact()
    assert _sums(store) == {}


def test_rollups_outlive_the_jobs_pruned(timed_store: Store, clock: Clock) -> None:
    store = timed_store
    store.jobs_insert(jobs=[new(task="old") for _ in range(3)])
    applied(store.jobs_finish([Completion(job.lease, None, TIMED) for job in claim(store, 3)]))
    before = _sums(store)
    clock.advance(timedelta(days=2))
    assert store.jobs_prune(older_than=timedelta(days=1)) == 3
    assert _sums(store) == before
