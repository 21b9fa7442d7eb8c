"""What only the memory store does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from redrive.store.memory import MemoryStore
from redrive.testing import claim, claim_one, new


def test_memory_store_runs_on_an_injected_clock() -> None:
    now = [datetime(2026, 1, 1, 9, 0, tzinfo=UTC)]
    store = MemoryStore(clock=lambda: now[0])
    (job,) = [r.job for r in store.jobs_insert(jobs=[new(delay=timedelta(minutes=5))])]
    assert claim(store) == []
    now[0] += timedelta(minutes=5)
    assert claim_one(store).id == job.id
