"""On PostgreSQL a job's happy-path events (queued at enqueue, its first
start, its success) are not written as rows: its own row implies them
(migration 0032, docs/storage.md). Its history reads exactly as the other
stores write it: the same transitions, attempts and meta, at the row's own
times, with ids in the order the events happened."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any
from uuid import uuid4

import psycopg
import pytest

from redrive.core.job import Job, JobKey, NewJob
from redrive.core.limits import Limits, Rule
from redrive.core.states import Status
from redrive.core.transitions import Completion, RetryLater
from redrive.store.memory import MemoryStore
from redrive.store.port import Store
from redrive.store.url import open_store
from redrive.testing import applied, assert_history, claim, claim_one, fail, new, reclaim, revive, wait_for

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(pg_url: str) -> Iterator[Store]:
    store = open_store(pg_url)
    yield store
    store.close()


def _written(pg_url: str, job_id: Any) -> list[str]:
    with psycopg.connect(pg_url) as conn:
        return [r[0] for r in conn.execute(
            "SELECT to_status FROM redrive_job_event WHERE job_id = %s ORDER BY id", (job_id,))]


def _shape(store: Store, job_id: Any) -> list[tuple[Any, ...]]:
    return [(e.from_status, e.to_status, e.attempt, e.meta) for e in assert_history(store, job_id)]


def _happy(store: Store) -> Job:
    (job,) = [r.job for r in store.jobs_insert(jobs=[new()])]
    held = claim_one(store)
    assert applied(store.jobs_finish([Completion(held.lease, {"x": 1}, {"duration_ms": 5})])) == {held.lease}
    return job


def _retried(store: Store) -> Job:
    (job,) = [r.job for r in store.jobs_insert(jobs=[new()])]
    held = claim_one(store)
    store.jobs_finish([RetryLater(held.lease, timedelta(0), "UPSTREAM_5XX", "503", {"duration_ms": 2})])
    again = store.jobs_claim(queues=["default"], limit=1, worker_id="w-2", lease_ttl=timedelta(seconds=30))[0]
    store.jobs_finish([Completion(again.lease, None, {"duration_ms": 3})])
    return job


def _reclaimed(store: Store) -> Job:
    (job,) = [r.job for r in store.jobs_insert(jobs=[new()])]
    held = claim_one(store, ttl=timedelta(milliseconds=100))
    assert wait_for(lambda: reclaim(store), timeout=5) == [held.id]
    again = store.jobs_claim(queues=["default"], limit=1, worker_id="w-2", lease_ttl=timedelta(seconds=30))[0]
    store.jobs_finish([Completion(again.lease, None, {})])
    return job


def _cancelled_waiting(store: Store) -> Job:
    (job,) = [r.job for r in store.jobs_insert(jobs=[new()])]
    store.jobs_cancel(job_ids=[job.id], by="ops:ana")
    return job


def _failed_revived_succeeded(store: Store) -> Job:
    (job,) = [r.job for r in store.jobs_insert(jobs=[new()])]
    fail(store, claim_one(store))
    revive(store, job.id, "replay", "ops:ana")
    held = claim_one(store)
    store.jobs_finish([Completion(held.lease, None, {"duration_ms": 1})])
    return job


def _keyed_batch(store: Store) -> Job:
    jobs = [r.job for r in store.jobs_insert(jobs=[new(args=[1]), _keyed(new(args=[2])), new(args=[3])])]
    for held in claim(store, 3):
        store.jobs_finish([Completion(held.lease, None, {"duration_ms": 4})])
    return jobs[1]


def _keyed(job: NewJob) -> NewJob:
    job.key = JobKey(key="k-1", version=1, fingerprint="f", kind="content")
    return job


def _under_a_limit(store: Store) -> Job:
    (job,) = [r.job for r in store.jobs_insert(jobs=[new()])]
    held = claim_one(store, limits=Limits({"queue:default": Rule(concurrency=2)}))
    store.jobs_finish([Completion(held.lease, None, {"duration_ms": 6})])
    return job


def _scheduled(store: Store) -> Job:
    (job,) = [r.job for r in store.jobs_insert(jobs=[new(delay=timedelta(hours=1))])]
    return job


LIVES: dict[str, tuple[Callable[[Store], Job], list[str]]] = {
    # what each life writes as rows on PostgreSQL
    "happy": (_happy, []),
    "retried": (_retried, ["queued", "running"]),
    "reclaimed": (_reclaimed, ["queued", "running"]),
    "cancelled while waiting": (_cancelled_waiting, ["cancelled"]),
    "failed, revived, succeeded": (_failed_revived_succeeded, ["failed", "queued", "running"]),
    "keyed, in a batch": (_keyed_batch, []),
    "claimed under a limit": (_under_a_limit, []),
    "scheduled": (_scheduled, ["scheduled"]),
}


@pytest.mark.parametrize("life", list(LIVES))
def test_a_history_reads_as_the_memory_store_writes_it_and_only_what_the_row_cannot_say_is_written(
    life: str, pg: Store, pg_url: str,
) -> None:
    make, written = LIVES[life]
    memory = MemoryStore()
    on_pg, in_memory = make(pg), make(memory)
    # the same history as a store that writes every event
    assert _shape(pg, on_pg.id) == _shape(memory, in_memory.id)
    # ids in the order the events happened, each its own
    events = pg.job_events_list(job_id=on_pg.id)
    assert [e.id for e in events] == sorted({e.id for e in events})
    # at the row's own times: enqueued when created, first started when started, ended when finished
    job = pg.job_get(job_id=on_pg.id)
    assert events[0].at == job.created_at
    if job.started_at is not None:
        assert next(e.at for e in events if e.to_status is Status.RUNNING) == job.started_at
    if job.status is Status.SUCCEEDED:
        assert events[-1].at == job.finished_at
    # only the events a row cannot imply are rows
    assert _written(pg_url, on_pg.id) == written
    # and the newest of them read alike
    assert pg.job_events_list(job_id=on_pg.id, newest=2) == events[-2:]


def test_implied_ids_come_from_the_events_sequence_so_no_two_events_share_one(pg: Store, pg_url: str) -> None:
    jobs = [_happy(pg), _retried(pg), _happy(pg)]
    ids = [e.id for job in jobs for e in pg.job_events_list(job_id=job.id)]
    assert len(ids) == len(set(ids)) == 3 + 5 + 3
    assert ids == sorted(ids)  # each job's events were made after the last one's


def test_a_success_s_duration_is_read_from_its_row(pg: Store) -> None:
    before = pg.now()
    _happy(pg)
    assert [(r.failed, r.duration_s) for r in pg.runs_ended(since=before)] == [(False, 0.005)]


@pytest.mark.parametrize("meta", [
    {"duration_ms": 5, "wait_ms": 40},
    {"duration_ms": 5, "wait_ms": 40, "context": {"gateway": "202"}, "skipped": "already_done"},
    {"duration_ms": 2**31, "wait_ms": -3},  # past a column's range: that one stays in the meta
    {"duration_ms": 5.5},
    {},
])
def test_a_success_s_timings_have_columns_of_their_own_and_its_event_says_what_it_was_told(
    meta: dict[str, Any], pg: Store, pg_url: str,
) -> None:
    pg.jobs_insert(jobs=[new()])
    held = claim_one(pg)
    assert applied(pg.jobs_finish([Completion(held.lease, None, meta)])) == {held.lease}
    assert assert_history(pg, held.id)[-1].meta == meta
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT ended_duration_ms, ended_wait_ms, ended_meta FROM redrive_job_done "
                           "WHERE id = %s", (held.id,)).fetchone()
    whole = {k: v for k, v in meta.items() if type(v) is int and v < 2**31}
    assert row[:2] == (whole.get("duration_ms"), whole.get("wait_ms"))
    assert row[2] == ({k: v for k, v in meta.items() if k not in whole} or None)


def test_a_history_is_read_by_primary_keys_alone(pg: Store) -> None:
    # the view's filter on job_id must reach each table's primary key: a job's page at
    # 10,000,000 finished jobs reads three index entries, not the history
    with pg._connection() as conn, conn.transaction():  # type: ignore[attr-defined]
        conn.execute("SET LOCAL enable_seqscan = off")
        for name, extra in (("job_events_list", {}), ("job_events_newest", {"newest": 5})):
            plan = "\n".join(r["QUERY PLAN"] for r in conn.execute(
                "EXPLAIN " + pg._queries[name], {"id": uuid4(), **extra}))  # type: ignore[attr-defined]
            for index in ("redrive_job_event_pkey", "redrive_job_pkey", "redrive_job_done_pkey"):
                assert re.search(f"(Index|Bitmap Index) Scan( Backward)? (using|on) {index}", plan), plan
            assert "Seq Scan" not in plan, plan


def test_what_every_new_job_holds_is_stored_as_null_and_read_as_its_value(pg: Store, pg_url: str) -> None:
    # Given a job enqueued, one in a batch written by COPY, and a keyed one taken over by its version 2
    single, batch = new(), [new() for _ in range(200)]
    keyed = replace(new(), key=JobKey("order-1", version=2, fingerprint="f"))
    pg.jobs_insert(jobs=[single]), pg.jobs_insert(jobs=batch), pg.jobs_insert(jobs=[keyed])
    ids = [single.id, batch[0].id, keyed.id]

    def stored(table: str) -> list[tuple]:
        with psycopg.connect(pg_url) as conn:
            return [conn.execute(f"SELECT version, manual_retry_count, updated_at FROM {table} WHERE id = %s",
                                 (job_id,)).fetchone() for job_id in ids]

    # Then their rows hold NULL for version 1, no manual retry and "not changed since created"
    # (migration 0039), but a version 2 as it is, and each reads as the other stores' would
    assert stored("redrive_job") == [(None, None, None), (None, None, None), (2, None, None)]
    jobs = [pg.job_get(job_id=job_id) for job_id in ids]
    assert [(j.version, j.manual_retry_count, j.updated_at == j.created_at) for j in jobs] == [
        (1, 0, True), (1, 0, True), (2, 0, True)]
    # When each is claimed and succeeds
    held = claim(pg, 300)
    assert applied(pg.jobs_finish([Completion(h.lease, None, {}) for h in held])) == {h.lease for h in held}
    # Then the history's row says "not changed since it ended", read as its end
    assert stored("redrive_job_done") == [(None, None, None), (None, None, None), (2, None, None)]
    for job_id in ids:
        done = pg.job_get(job_id=job_id)
        assert done.status is Status.SUCCEEDED and done.updated_at == done.finished_at > done.created_at
