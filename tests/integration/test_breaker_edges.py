"""What a breaker does at its edges, with a worker in this process: fail-fast
and a code's retryability, and a slow health probe that must not stall the
worker's event loop."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from redrive import Actor, App, BreakerMode, BreakerPolicy, Dependency, Fixed, MemoryStore, Status
from redrive.core.breaker import Breaker, State
from tests.integration.test_worker_in_process import _run_until

QUICK = Fixed([timedelta(milliseconds=20)])


def test_fail_fast_retries_a_retryable_code_by_policy_and_fails_a_permanent_one_at_once() -> None:
    app = App(store=MemoryStore(), dependencies=[
        Dependency("mailer", mode=BreakerMode.FAIL_FAST, fail_code="UPSTREAM_5XX"),
        Dependency("registry", mode=BreakerMode.FAIL_FAST, fail_code="NOT_FOUND"),
    ])

    @app.task(dependencies=["mailer"], max_attempts=3, backoff=QUICK)
    def mail() -> None: ...

    @app.task(dependencies=["registry"], max_attempts=3, backoff=QUICK)
    def look_up() -> None: ...

    ops = app.admin(Actor.operator("ops"))
    ops.open_breaker("mailer")
    ops.open_breaker("registry")
    mailed, looked = mail.enqueue().job, look_up.enqueue().job
    asyncio.run(_run_until(app, lambda: all(app.client.job(j.id).status is Status.FAILED for j in (mailed, looked))))
    mailed, looked = app.client.job(mailed.id), app.client.job(looked.id)
    assert (mailed.error_code, mailed.attempts) == ("UPSTREAM_5XX", 3)  # "it will be retried": it was
    assert (looked.error_code, looked.attempts) == ("NOT_FOUND", 1)


def test_a_slow_sync_health_probe_does_not_stall_heartbeats() -> None:
    probes: list[float] = []

    def slow_probe() -> bool:  # the README's shape: a blocking HTTP call
        probes.append(time.monotonic())
        time.sleep(2.0)
        return False

    store = MemoryStore()
    app = App(store=store, dependencies=[
        Dependency("gateway", policy=BreakerPolicy(), probe=slow_probe, probe_interval=timedelta(milliseconds=100)),
    ])

    @app.task
    async def long_job() -> str:
        await asyncio.sleep(3.0)
        return "done"

    store.breaker_update(name="gateway", change=lambda b, now: Breaker()._to(State.OPEN, now, "test"))
    job = long_job.enqueue().job
    asyncio.run(_run_until(app, lambda: app.client.job(job.id).status is Status.SUCCEEDED,
                           lease_ttl=timedelta(seconds=1)))
    # The probe ran while the job did, and the job kept its lease throughout
    assert probes
    assert app.client.job(job.id).attempts == 1
    events = app.admin(Actor.operator("ops")).job_events(job.id)
    assert [e.to_status for e in events] == [Status.QUEUED, Status.RUNNING, Status.SUCCEEDED]
