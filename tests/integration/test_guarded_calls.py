"""A call wrapped in its dependency's breaker inside a task (in-process worker)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from redrive import Actor, App, BreakerPolicy, Dependency, Fixed, MemoryStore, Status, Transient, current_job, guarded
from tests.integration.test_worker_in_process import _run_until

ONE_STRIKE = BreakerPolicy(failure_rate=100, window_calls=5, min_calls=1, wait=timedelta(hours=1))
FAST = Fixed([timedelta(milliseconds=10)])
OPERATOR = Actor.operator("test")


def test_a_guarded_call_feeds_the_breaker_and_an_open_one_holds_the_job() -> None:
    app = App(store=MemoryStore(), dependencies=[Dependency("svc", policy=ONE_STRIKE)])
    calls: list[str] = []

    # The retry waits out the gate's batching (outcomes reach the shared state
    # within a quarter second), so it finds the breaker open.
    @app.task(dependencies=["svc"], backoff=Fixed([timedelta(seconds=1)]), max_attempts=5)
    def fetch() -> str:
        with guarded("svc"):
            calls.append(f"fetch {current_job().attempts}")
            if len(calls) == 1:
                raise Transient("503 from svc", code="UPSTREAM_5XX")
        return "done"

    @app.task(backoff=FAST)  # declares nothing, so the claim cannot hold it back
    def sometimes() -> str:
        with guarded("svc"):
            calls.append("sometimes")
        return "called"

    job = app.enqueue("fetch").job
    # The first call fails: one strike opens the breaker and the claim holds the retry
    asyncio.run(_run_until(app, lambda: app.admin(OPERATOR).breakers()["svc"].state == "open"))
    other = app.enqueue("sometimes").job
    asyncio.run(_run_until(app, lambda: any(
        e.meta.get("reason") == "breaker_open" for e in app.client.job_events(other.id))))
    # past the retry's due time, the worker still does not claim it
    deadline = time.monotonic() + 1.5
    asyncio.run(_run_until(app, lambda: time.monotonic() > deadline))
    assert calls == ["fetch 1"]  # nothing reached svc while open
    held, waiting = app.client.job(job.id), app.client.job(other.id)
    assert (held.status, held.attempts) == (Status.QUEUED, 1)
    assert (waiting.status, waiting.attempts) == (Status.QUEUED, 0)  # no attempt spent
    # the job's own retry did not count a second time against the breaker
    assert [e.to_state for e in app.store.breaker_events_list(name="svc")] == ["open"]

    app.admin(Actor.operator("ops")).close_breaker("svc")
    asyncio.run(_run_until(app, lambda: all(
        app.client.job(i).status is Status.SUCCEEDED for i in (job.id, other.id))))
    assert sorted(calls) == ["fetch 1", "fetch 2", "sometimes"]
    assert app.admin(OPERATOR).breakers()["svc"].state == "closed"
