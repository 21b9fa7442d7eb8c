"""Workflows as an application declares, creates, runs and operates them,
on SQLite and PostgreSQL: a chain and a DAG run in order under ``drain``, a
join reads every member's result, an empty fan-out releases its join, a
failed step's dependents are blocked until ``Admin.retry_workflow`` and then
run once, ``Admin.cancel_workflow`` starts nothing more, a workflow belongs to
its owner, its creation joins the caller's transaction, and every mistake in
a declaration is a ``ConfigError`` before anything is written."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import redrive
from redrive import (
    Actor,
    After,
    App,
    ConfigError,
    Fixed,
    Forbidden,
    Permanent,
    Status,
    Transient,
    Workflow,
    WorkflowNotFound,
    WorkflowStatus,
    parent_results,
    parents,
)
from redrive.store.reads import JobFilter
from redrive.testing import drain


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: Any, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'redrive.db'}"
    return request.getfixturevalue("pg_url")


def _app(url: str) -> tuple[App, list[str], set[str]]:
    app, ran, failing = App(url), [], set()

    @app.task
    def step(name: str) -> str:
        ran.append(name)
        if name in failing:
            raise Permanent(f"{name} is broken", code="BAD_INPUT")
        return name.upper()

    @app.task
    def join() -> dict:
        ran.append("join")
        return {"results": parent_results(), "endings": sorted({p.status.value for p in parents()})}

    return app, ran, failing


def test_a_chain_runs_in_order_and_a_join_reads_every_result(url: str) -> None:
    app, ran, _ = _app(url)
    step, join = app.registry.task("step"), app.registry.task("join")
    chain = app.create_workflow(Workflow.chain("line", [step.call("a"), step.call("b"), step.call("c")]))
    wf = Workflow("fan")
    root = wf.add(step.call("root"), name="root")
    parts = wf.map((step.call(f"p{n}") for n in range(5)), name="parts", after=root)
    wf.add(join.call(), name="join", after=[parts, root])
    fanned = app.create_workflow(wf)
    drain(app)
    assert ran.index("a") < ran.index("b") < ran.index("c")
    assert ran.index("root") < min(ran.index(f"p{n}") for n in range(5)) < ran.index("join")
    assert app.result(fanned.steps["join"][0], timeout=5) == {
        "results": {"parts": ["P0", "P1", "P2", "P3", "P4"], "root": "ROOT"}, "endings": ["succeeded"]}
    assert app.workflow(chain.id).status is WorkflowStatus.SUCCEEDED
    assert app.workflow(fanned.id).counts["parts"] == {Status.SUCCEEDED: 5}
    app.close()


def test_an_empty_fan_out_lets_its_join_run_at_once(url: str) -> None:
    app, ran, _ = _app(url)
    wf = Workflow("empty")
    parts = wf.map([], name="parts")
    wf.add(app.registry.task("join").call(), after=parts)
    created = app.create_workflow(wf)
    assert app.client.job(created.steps["join"][0]).status is Status.QUEUED
    drain(app)
    assert ran == ["join"]
    app.close()


def test_a_failed_step_blocks_what_follows_until_the_workflow_is_retried(url: str) -> None:
    app, ran, failing = _app(url)
    step = app.registry.task("step")
    wf = Workflow("abc", owner="team-a")
    a = wf.add(step.call("a"))
    b = wf.add(step.call("b"), after=a)
    wf.add(step.call("c"), after=b)
    wf.add(step.call("always"), after=After(b, "ended"))
    failing.add("b")
    created = app.create_workflow(wf)
    drain(app)
    state = app.workflow(created.id)
    assert state.status is WorkflowStatus.BLOCKED
    assert state.counts["step-3"] == {Status.BLOCKED: 1} and state.counts["step-4"] == {Status.SUCCEEDED: 1}
    with pytest.raises(Forbidden):
        app.admin(Actor.acting_for("team-b")).retry_workflow(created.id)
    failing.clear()
    retried = app.admin(Actor.acting_for("team-a")).retry_workflow(created.id)
    assert [job.args for job in retried] == [["b"]]
    drain(app)
    assert ran == ["a", "b", "always", "b", "c"]  # a does not run again, nor does the finally step
    assert app.workflow(created.id).status is WorkflowStatus.SUCCEEDED
    app.close()


def test_a_cancelled_workflow_starts_nothing_more(url: str) -> None:
    app, ran, _ = _app(url)
    step = app.registry.task("step")
    created = app.create_workflow(Workflow.chain("line", [step.call("a"), step.call("b")]))
    state = app.admin(Actor.operator("ops")).cancel_workflow(created.id)
    assert state.status is WorkflowStatus.CANCELLED and state.cancelled_by == "ops"
    drain(app)
    assert ran == []
    with pytest.raises(WorkflowNotFound):
        app.workflow("not-an-id")
    app.close()


def test_a_workflow_is_created_in_the_callers_transaction_or_not_at_all(url: str) -> None:
    app, _, _ = _app(url)
    step = app.registry.task("step")
    _ = app.store
    if url.startswith("sqlite"):
        conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"))
    else:
        conn = psycopg.connect(url)
    rolled_back = app.create_workflow(Workflow.chain("x", [step.call("a"), step.call("b")]), conn=conn)
    conn.rollback()
    committed = app.create_workflow(Workflow.chain("y", [step.call("a"), step.call("b")]), conn=conn)
    conn.commit()
    conn.close()
    with pytest.raises(WorkflowNotFound):
        app.workflow(rolled_back.id)
    assert app.workflow(committed.id).totals == {Status.QUEUED: 1, Status.PENDING: 1}
    app.close()


def test_every_mistake_in_a_declaration_is_a_config_error_before_anything_is_written(url: str) -> None:
    app, _, _ = _app(url)
    step = app.registry.task("step")
    wf = Workflow("w")
    wf.add(step.call("a"), name="a")
    mistakes = [
        (lambda: wf.add(step.call("b"), after="later"), "not a step of this workflow"),
        (lambda: wf.add(step.call("b"), name="a"), "a step named 'a' already"),
        (lambda: wf.add(step.call()), "cannot take these arguments"),
        (lambda: step.options(delay=1).call("b"), "a workflow.s step cannot take delay: a step chooses only"),
        (lambda: After("a", "sometimes"), "an edge's policy is one of"),
        (lambda: wf.map([], after="a"), "an empty fan-out needs a name="),
        (lambda: app.create_workflow(Workflow("nothing")), "at least one step"),
        (lambda: Workflow(""), "a workflow's name must be a non-empty string"),
    ]
    for make, message in mistakes:
        with pytest.raises(ConfigError, match=message):
            make()
    assert app.store.jobs_page(where=JobFilter()).items == []
    app.close()


def test_a_job_spawns_children_and_a_join_created_once_with_its_success_however_often_it_ran(url: str) -> None:
    app, ran, _ = _app(url)
    step, join = app.registry.task("step"), app.registry.task("join")
    runs: list[str] = []

    @app.task(max_attempts=3, backoff=Fixed([timedelta(0)]))
    def split(doc: str) -> dict:
        children = Workflow(f"parts of {doc}")
        parts = children.map((step.call(f"{doc}-{n}") for n in range(4)), name="parts")
        children.add(join.call(), name="join", after=parts)
        spawned = redrive.spawn(children)
        runs.append(doc)
        if len(runs) < 3:  # the first two runs spawn, then fail: nothing of theirs may be created
            raise Transient("the splitter's store blinked")
        return {"children": str(spawned)}

    job = split.options(owner="alice").enqueue("doc").job
    drain(app)
    assert runs == ["doc", "doc", "doc"]
    ops = app.admin(Actor.operator("ops"))
    made = ops.workflows()
    assert len(made) == 1, "a run that did not succeed created nothing"
    (children,) = made
    assert app.result(job.id, timeout=5) == {"children": str(children.id)}
    assert children.spawned_by == job.id and children.owner == "alice"
    assert children.status is WorkflowStatus.SUCCEEDED and children.counts["parts"] == {Status.SUCCEEDED: 4}
    assert sorted(r for r in ran if r.startswith("doc-")) == [f"doc-{n}" for n in range(4)]
    assert ran.count("join") == 1 and ran.index("join") > max(ran.index(f"doc-{n}") for n in range(4))
    (join_id,) = app.admin(Actor.acting_for("alice")).workflow_steps(children.id)["join"]
    assert app.result(join_id, timeout=5)["results"] == {"parts": ["DOC-0", "DOC-1", "DOC-2", "DOC-3"]}
    app.close()


def test_spawn_outside_a_run_or_of_a_non_workflow_is_a_clear_error(url: str) -> None:
    app, _, _ = _app(url)
    with pytest.raises(ConfigError, match="inside a running task"):
        redrive.spawn(Workflow("x"))

    @app.task
    def wrong() -> None:
        redrive.spawn("not a workflow")  # type: ignore[arg-type]

    @app.task
    def bad_args() -> None:
        children = Workflow("kids")
        children.add(app.registry.task("step").call(object()))  # not JSON: refused as enqueue refuses it
        redrive.spawn(children)

    wrong.enqueue()
    bad_args.enqueue()
    drained = drain(app)
    assert sorted(f.status for f in drained.endings) == [Status.FAILED, Status.FAILED]
    ops = app.admin(Actor.operator("ops"))
    assert list(ops.workflows()) == []
    messages = sorted(j.error_message or "" for j in ops.jobs(status=Status.FAILED).items)
    assert any("spawn() takes a redrive.Workflow" in m for m in messages), messages
    assert any("JSON" in m for m in messages), messages
    app.close()
