"""On PostgreSQL a breaker's change is read, decided in the worker and
written only if no one wrote since: no row lock is held while the worker
decides (workers on many hosts never queue on a dependency's one row), and a
write that lost the race decides again from what won."""

from __future__ import annotations

import psycopg
import pytest

from redrive.core.breaker import BreakerPolicy, Call, force_open, record
from redrive.store.url import open_store

POLICY = BreakerPolicy(window_calls=100, min_calls=100)
HELD = ("SELECT count(*) FROM pg_locks AS l JOIN pg_class AS c ON c.oid = l.relation "
        "WHERE c.relname = 'redrive_breaker' AND l.pid <> pg_backend_pid()")


@pytest.mark.postgres
def test_no_lock_is_held_while_a_worker_decides_and_a_lost_race_decides_again(pg_url) -> None:
    worker, other = open_store(pg_url), open_store(pg_url)
    seen: list[tuple[int, int, int]] = []
    try:
        with psycopg.connect(pg_url, autocommit=True) as watcher:
            def change(b, now):
                held = watcher.execute(HELD).fetchone()[0]
                idle = watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                       "AND state = 'idle in transaction'").fetchone()[0]
                seen.append((len(b.window), held, idle))
                if len(seen) == 1 and not held:  # another worker writes between this read and its write
                    other.breaker_update(name="gateway", change=lambda b, now: record(b, POLICY, [Call(now, False)], now))
                return record(b, POLICY, [Call(now, True)], now)

            after = worker.breaker_update(name="gateway", change=change)
        # decided twice: on the empty window, then on the one the other worker wrote; no lock, no open transaction
        assert seen == [(0, 0, 0), (1, 0, 0)]
        assert [c.ok for c in after.window] == [False, True]
        assert [c.ok for c in worker.breakers_list()[0]["gateway"].window] == [False, True]
        # a state change made on the second decision is one event, with who made it
        worker.breaker_update(name="gateway", change=lambda b, now: force_open(b, now), by="ops")
        (event,) = worker.breaker_events_list(name="gateway")
        assert (event.to_state, event.by) == ("open", "ops")
    finally:
        worker.close()
        other.close()
