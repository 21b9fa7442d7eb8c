"""A process that ends workflow parents at the same instant as another
(tests/integration/test_workflow_races.py): it claims the next parent from
its own queue, meets the other process at a barrier, and writes the
parent's success. Importable by name, as a spawned process needs."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from redrive.core.transitions import Completion
from redrive.store.url import open_store

_TTL = timedelta(minutes=5)


def end_parents(url: str, queue: str, count: int, barrier: Any) -> None:
    store = open_store(url)
    try:
        for n in range(count):
            deadline = time.monotonic() + 30
            while not (jobs := store.jobs_claim(queues=[queue], limit=1, worker_id=f"racer-{queue}",
                                                lease_ttl=_TTL)):
                if time.monotonic() > deadline:
                    raise AssertionError(f"parent {n} of {queue} never came")
            barrier.wait(timeout=30)
            store.jobs_finish([Completion(jobs[0].lease, n)])
    finally:
        store.close()



def create_keyed(url: str, key: str, barrier: Any, answers: Any) -> None:
    """Create the workflow keyed ``key`` at the same instant as the others;
    tell what the store answered."""
    from redrive.testing.suite.workflows import flow

    store = open_store(url)
    try:
        workflow, _ = flow({"a": [], "b": [("a", "succeeded")]}, key=key, owner="team")
        barrier.wait(timeout=60)
        created = store.workflow_insert(workflow=workflow)
        answers.put((str(created.id), created.duplicate))
    finally:
        store.close()
