"""Stages under a worker in this process (memory store): async pipelines,
fencing of saved output, and how a stage is misused."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from redrive import Actor, App, Fixed, MemoryStore, Stage, Status, Transient, current_job, stage
from redrive.core.transitions import Requeue
from tests.integration.test_worker_in_process import _finished, _run_until

FAST = Fixed([timedelta(milliseconds=10)])


def test_an_async_pipeline_resumes_at_the_stage_that_failed() -> None:
    app = App(store=MemoryStore())
    calls: list[str] = []

    def load(n: int) -> int:  # a sync stage function inside an async task
        calls.append("load")
        return n * 2

    async def score(value: int) -> dict:
        calls.append("score")
        if calls.count("score") < 3:
            raise Transient("model overloaded", code="UPSTREAM_5XX")
        return {"score": value + 1}

    @app.task(stages=[Stage("load", backoff=FAST), Stage("score", max_attempts=4, backoff=FAST)])
    async def rank(n: int) -> dict:
        loaded = await stage("load", load, n)
        return await stage("score", score, loaded)

    job = app.enqueue("rank", args=[20]).job
    assert job.max_attempts == 5 + 4  # the stages' budgets, unless capped
    asyncio.run(_run_until(app, _finished(app, [job.id])))
    done = app.client.job(job.id)
    assert (done.status, done.result) == (Status.SUCCEEDED, {"score": 41})
    assert calls == ["load", "score", "score", "score"]
    assert done.checkpoint == {"load": 40, "score": {"score": 41}}
    assert done.stage_attempts == {"load": 1, "score": 3}


def test_a_plain_task_is_one_stage_named_after_it() -> None:
    app = App(store=MemoryStore())

    @app.task(max_attempts=2, backoff=FAST)
    def ping() -> None:
        raise Transient("down", code="NETWORK_ERROR")

    job = app.enqueue("ping").job
    assert job.stage == "ping"
    asyncio.run(_run_until(app, _finished(app, [job.id])))
    (letter,) = app.admin(Actor.operator("test")).dead_letters()
    assert (letter.stage, letter.stage_attempts, letter.attempts) == ("ping", {"ping": 2}, 2)


def test_a_stage_that_finishes_after_losing_its_lease_saves_nothing() -> None:
    app = App(store=MemoryStore())
    store = app.store
    runs: list[str] = []

    def step() -> str:
        runs.append(str(current_job().lease_token))
        if len(runs) == 1:
            store.jobs_finish([Requeue(current_job().lease)])  # as a reclaim elsewhere would
        return f"from run {len(runs)}"

    @app.task(stages=["step"])
    def contested() -> str:
        return stage("step", step)

    job = app.enqueue("contested").job
    asyncio.run(_run_until(app, _finished(app, [job.id])))
    done = app.client.job(job.id)
    # the run whose lease was gone saved nothing; the next one did the work
    assert len(runs) == 2 and runs[0] != runs[1]
    assert done.checkpoint == {"step": "from run 2"} and done.result == "from run 2"
    assert done.stage_attempts == {"step": 1}
    assert [e.to_status for e in app.client.job_events(job.id)].count(Status.SUCCEEDED) == 1


def test_misusing_a_stage_is_a_bug_with_a_clear_message() -> None:
    app = App(store=MemoryStore())

    @app.task(stages=["fetch"])
    def undeclared() -> None:
        stage("parse", lambda: None)

    @app.task(stages=["fetch"])
    def not_json() -> None:
        stage("fetch", lambda: object())

    ids = [app.enqueue("undeclared").job.id, app.enqueue("not_json").job.id]
    asyncio.run(_run_until(app, _finished(app, ids)))
    first, second = (app.client.job(i) for i in ids)
    assert first.error_code == "BUG"
    assert "declares no stage 'parse' (it has: fetch)" in first.error_message
    assert second.error_code == "BUG" and "not JSON" in second.error_message
