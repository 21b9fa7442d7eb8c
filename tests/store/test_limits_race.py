"""On PostgreSQL a claim with limits holds no lock while its worker reads or
decides: it reads the due jobs and their permits without one, works out each
key's room, and claims in one statement that takes the limits' lock and
picks there on those rooms less the starts made since its read (migration
0033). Workers racing for the same limit never start more than it allows."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import psycopg
import pytest

from redrive.core.limits import Limits, Rate, Rule
from redrive.core.transitions import Completion
from redrive.store.postgres import work
from redrive.store.url import open_store
from redrive.testing import new

pytestmark = pytest.mark.postgres

WORKERS = 4
# the limits' lock, held in this test's database by a backend not running a
# statement: held across a round trip
HELD = ("SELECT l.pid FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND a.state <> 'active' "
        "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())")
IDLE = ("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND state = 'idle in transaction'")


def _lasting(watcher: psycopg.Connection, query: str) -> int:
    """The backends ``query`` finds in three reads 20 ms apart. pg_locks and
    pg_stat_activity are two snapshots: a claim that commits between them
    reads, once, as a lock held while idle. A lock held across the deciding
    worker's round trip lasts: that worker waits on this watcher."""
    found = {row[0] for row in watcher.execute(query)}
    for _ in range(2):
        if not found:
            break
        time.sleep(0.02)
        found &= {row[0] for row in watcher.execute(query)}
    return len(found)


def _race(pg_url: str, limits: Limits, finish: bool, monkeypatch) -> tuple[int, list[tuple[int, int]]]:
    """WORKERS threads, each with its own store, claiming two at a time
    until none of them gets anything; how many jobs started, and what a
    watcher saw each time a worker decided."""
    seen: list[tuple[int, int]] = []
    watch_lock = threading.Lock()
    real_pick = work.pick
    with psycopg.connect(pg_url, autocommit=True) as watcher:
        def watched_pick(*args, **kwargs):
            with watch_lock:
                seen.append((_lasting(watcher, HELD), _lasting(watcher, IDLE)))
            return real_pick(*args, **kwargs)

        monkeypatch.setattr(work, "pick", watched_pick)
        stores = [open_store(pg_url) for _ in range(WORKERS)]
        started: list[int] = []
        gate = threading.Barrier(WORKERS)

        def worker(store) -> None:
            gate.wait()
            for _ in range(30):
                jobs = store.jobs_claim(queues=["default"], limit=2, worker_id="w", lease_ttl=timedelta(minutes=5),
                                        limits=limits)
                started.append(len(jobs))
                if finish and jobs:
                    store.jobs_finish([Completion(job.lease, None, {}) for job in jobs])

        try:
            threads = [threading.Thread(target=worker, args=(s,)) for s in stores]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
        finally:
            for s in stores:
                s.close()
    return sum(started), seen


def test_racing_claims_start_no_more_than_a_concurrency_limit_and_hold_no_lock_while_deciding(
    pg_url: str, monkeypatch,
) -> None:
    store = open_store(pg_url)
    store.jobs_insert(jobs=[new() for _ in range(40)])
    store.close()
    total, seen = _race(pg_url, Limits({"queue:default": Rule(concurrency=5)}), False, monkeypatch)
    assert total == 5  # never more than the limit, and the limit reached
    assert seen and all(held == 0 and idle == 0 for held, idle in seen), seen


def test_racing_claims_start_no_more_than_a_rate(pg_url: str, monkeypatch) -> None:
    store = open_store(pg_url)
    store.jobs_insert(jobs=[new() for _ in range(40)])
    store.close()
    total, _ = _race(pg_url, Limits({"queue:default": Rule(rate=Rate(7, timedelta(hours=1)))}), True, monkeypatch)
    assert total == 7
