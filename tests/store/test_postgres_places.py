"""A PostgreSQL store ends the jobs it claimed where their rows are
(``places.py``: the claim's and each heartbeat's ctid, a TID scan) and,
for a row that moved since or a lease it lost, by id: never twice, never a
job it no longer holds."""

from __future__ import annotations

import time
from datetime import timedelta

import psycopg
import pytest

from redrive.core.transitions import Completion, FailNow
from redrive.store.postgres.places import _text
from redrive.store.postgres.store import PostgresStore
from redrive.testing import applied, claim, claim_one, new


@pytest.fixture
def store(pg_url: str):
    opened = PostgresStore(pg_url)
    yield opened
    opened.close()


def _endings_by_id(store: PostgresStore, monkeypatch) -> list[int]:
    """A list that gains an item at each ending by id (``jobs_finish``) the store makes from now on."""
    calls: list[int] = []

    class Counting(dict):
        def __getitem__(self, name: str) -> str:
            if name == "jobs_finish":
                calls.append(1)
            return super().__getitem__(name)

    monkeypatch.setattr(store, "_queries", Counting(store._queries))
    return calls


def _history(pg_url: str) -> dict:
    with psycopg.connect(pg_url) as conn:
        return dict(conn.execute("SELECT id, count(*) FROM redrive_job_done GROUP BY id").fetchall())


def test_a_batch_this_store_claimed_ends_where_its_rows_are(store, pg_url, monkeypatch) -> None:
    store.jobs_insert(jobs=[new() for _ in range(5)])
    jobs = claim(store, 5)
    assert len(store._places) == 5
    by_id = _endings_by_id(store, monkeypatch)
    written = store.jobs_finish([Completion(job.lease, {"n": n}, {"duration_ms": 3}) for n, job in enumerate(jobs)])
    assert applied(written) == {job.lease for job in jobs}
    assert by_id == [], "each row was found where the claim left it"
    assert _history(pg_url) == {job.id: 1 for job in jobs}
    assert len(store._places) == 0, "a lease ends once: its place is forgotten"


def test_a_heartbeat_keeps_where_the_row_went(store, pg_url, monkeypatch) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    claimed_at = store._places._at[job.lease.token]
    assert store.leases_extend(leases=[job.lease], lease_ttl=timedelta(seconds=60)) == {job.lease}
    moved_to = store._places._at[job.lease.token]
    with psycopg.connect(pg_url) as conn:
        (now_at,) = conn.execute("SELECT ctid::text FROM redrive_job WHERE id = %s", (job.id,)).fetchone()
    assert moved_to == now_at and now_at != _text(claimed_at)
    by_id = _endings_by_id(store, monkeypatch)
    assert applied(store.jobs_finish([Completion(job.lease, None)])) == {job.lease}
    assert by_id == [] and _history(pg_url) == {job.id: 1}


def test_a_row_that_moved_since_is_ended_by_id_once(store, pg_url, monkeypatch) -> None:
    store.jobs_insert(jobs=[new() for _ in range(3)])
    jobs = claim(store, 3)
    with psycopg.connect(pg_url) as conn:  # any update writes the row's new version elsewhere
        conn.execute("UPDATE redrive_job SET updated_at = now() WHERE id = %s", (jobs[1].id,))
    by_id = _endings_by_id(store, monkeypatch)
    finish = [Completion(jobs[0].lease, None), FailNow(jobs[1].lease, "AUTH_DENIED", "no"),
              Completion(jobs[2].lease, None)]
    written = store.jobs_finish(finish)
    assert applied(written) == {job.lease for job in jobs}
    assert by_id == [], "the moved row was a failure's: failures are found by id already"
    store.jobs_insert(jobs=[new() for _ in range(2)])
    more = claim(store, 2)
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE redrive_job SET updated_at = now() WHERE id = %s", (more[0].id,))
    assert applied(store.jobs_finish([Completion(job.lease, None) for job in more])) == {job.lease for job in more}
    assert by_id == [1], "the success whose row moved was looked for again, by id, in the same transaction"
    assert _history(pg_url) == {job.id: 1 for job in [*jobs, *more]}


def test_a_lease_lost_is_not_ended_where_the_row_was(store, pg_url) -> None:
    store.jobs_insert(jobs=[new()])
    lost = claim_one(store, ttl=timedelta(seconds=0.2))
    time.sleep(0.3)
    other = PostgresStore(pg_url)
    try:
        assert [f.lease for f in other.jobs_reclaim()] == [lost.lease]  # back in the queue, its row moved
        again = claim_one(other)
        assert store.jobs_finish([Completion(lost.lease, "late")]) == [], "fenced: not the lease that holds it"
        assert applied(other.jobs_finish([Completion(again.lease, "done")])) == {again.lease}
    finally:
        other.close()
    assert _history(pg_url) == {lost.id: 1}
    with psycopg.connect(pg_url) as conn:
        (result,) = conn.execute("SELECT result FROM redrive_job_done WHERE id = %s", (lost.id,)).fetchone()
    assert result == "done"
