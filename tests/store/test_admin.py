"""The operator API acts as one principal, on every store: an owner may read,
retry and cancel their own jobs and nothing of anyone else's; dead letters,
breakers, the outbox and pruning are for operators; every refusal is
``Forbidden`` and changes nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from redrive import Actor, Admin, App, Forbidden, IllegalTransition, Registry, UnknownDependency
from redrive.core.breaker import force_open
from redrive.core.job import Job, NewJob
from redrive.core.states import Status
from redrive.store.port import Store
from redrive.testing import claim_one, count_jobs, fail, letter_of
from redrive.testing.suite.workflows import flow as workflow_of

ANN = Actor.acting_for("ann")
BOB = Actor.acting_for("bob")
OPS = Actor.operator("ops:carol")


def _enqueue(store: Store, owner: str, *, delay: timedelta | None = None) -> Job:
    new = NewJob(id=uuid.uuid4(), task="t", queue="default", args=[], kwargs={}, priority=0,
                 max_attempts=3, owner=owner, delay=delay, stage="t")
    return store.jobs_insert(jobs=[new])[0].job


@dataclass
class World:
    """Ann's jobs in each state that matters, and the stores' other objects."""

    store: Store
    failed: Job  # with an open dead letter
    waiting: Job  # scheduled, so it can be cancelled
    letter_id: int
    flow: uuid.UUID  # a workflow of Ann's, its first step in queue "flows"


@pytest.fixture
def world(store: Store) -> World:
    failed = _enqueue(store, "ann")
    fail(store, claim_one(store))
    waiting = _enqueue(store, "ann", delay=timedelta(hours=1))
    store.breaker_update(name="gateway", change=lambda b, now: b)
    store.queue_pause(queue="reports", by="ops:dan")
    flow, _ = workflow_of({"a": [], "b": [("a", "succeeded")]}, owner="ann")
    store.workflow_insert(workflow=flow)
    return World(store, store.job_get(job_id=failed.id), waiting, letter_of(store, failed.id).id, flow.id)


def _snapshot(w: World) -> Any:
    """Everything an operation could change."""
    s = w.store
    return ([s.job_get(job_id=w.failed.id), s.job_get(job_id=w.waiting.id)],
            [s.job_events_list(job_id=w.failed.id), s.job_events_list(job_id=w.waiting.id)],
            s.dead_letter_get(id=w.letter_id), s.breakers_list()[0], count_jobs(s),
            dict(s.control_read(job_ids=[]).paused))


def _scheduled() -> App:
    """Declarations with a schedule, for run_schedule."""
    app = App("memory://")
    app.task(lambda: None, name="digest")
    app.schedule("nightly", "digest", "0 3 * * *", timezones=["UTC", "Asia/Kolkata"])
    return app


# Every operation of Admin, as a call on a world: the test below fails for a
# public method that is missing here, so a new operation cannot skip its rule.
OPERATIONS: dict[str, Callable[[Admin, World], Any]] = {
    "job": lambda a, w: a.job(w.failed.id),
    "jobs": lambda a, w: a.jobs(owner="ann"),
    "job_events": lambda a, w: a.job_events(w.failed.id),
    "progress": lambda a, w: a.progress(w.failed.id),
    "retry": lambda a, w: a.retry(w.failed.id),
    "cancel": lambda a, w: a.cancel(w.waiting.id),
    "workflow": lambda a, w: a.workflow(w.flow),
    "workflows": lambda a, w: a.workflows(owner="ann"),
    "workflow_steps": lambda a, w: a.workflow_steps(w.flow),
    "cancel_workflow": lambda a, w: a.cancel_workflow(w.flow),
    "retry_workflow": lambda a, w: a.retry_workflow(w.flow),
    "bulk": lambda a, w: a.bulk("cancel", owner="ann"),
    "delete": lambda a, w: a.delete(w.failed.id),
    "dead_letters": lambda a, w: a.dead_letters(),
    "dead_letter": lambda a, w: a.dead_letter(w.letter_id),
    "dead_letter_facets": lambda a, w: a.dead_letter_facets(),
    "queues": lambda a, w: a.queues(),
    "finished_per_minute": lambda a, w: a.finished_per_minute(60),
    "charts": lambda a, w: a.charts("24h", by="task"),
    "pause_queue": lambda a, w: a.pause_queue("email"),
    "resume_queue": lambda a, w: a.resume_queue("reports"),
    "reveal": lambda a, w: a.reveal(w.failed.id),
    "audit_trail": lambda a, w: a.audit_trail(w.failed.id),
    "schedules": lambda a, w: a.schedules(),
    "workers": lambda a, w: a.workers(),
    "breaker_history": lambda a, w: a.breaker_history("gateway"),
    "note": lambda a, w: a.note(w.letter_id, "quota raised"),
    "replay": lambda a, w: a.replay([w.letter_id]),
    "replay_matching": lambda a, w: a.replay_matching(task="t"),
    "resolve": lambda a, w: a.resolve([w.letter_id], note="refunded by hand"),
    "resolve_matching": lambda a, w: a.resolve_matching(task="t"),
    "breakers": lambda a, w: a.breakers(),
    "open_breaker": lambda a, w: a.open_breaker("gateway"),
    "close_breaker": lambda a, w: a.close_breaker("gateway"),
    "outbox": lambda a, w: a.outbox(),
    "prune": lambda a, w: a.prune(timedelta(days=1)),
    "pause_schedule": lambda a, w: Admin(a.store, actor=a.actor, registry=_scheduled().registry).pause_schedule(
        "nightly"),
    "resume_schedule": lambda a, w: a.resume_schedule("nightly"),
    "run_schedule": lambda a, w: Admin(a.store, actor=a.actor, registry=_scheduled().registry).run_schedule(
        "nightly", run="r1"),
}
OWNERS_MAY = {"job", "jobs", "job_events", "progress", "retry", "cancel", "bulk", "delete", "workflow", "workflows",
              "workflow_steps", "cancel_workflow", "retry_workflow"}


def test_every_operation_of_admin_has_a_rule_here() -> None:
    public = {n for n in dir(Admin) if not n.startswith("_") and callable(getattr(Admin, n))}  # its subjects too
    assert public - {"open", "close"} == set(OPERATIONS)


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_another_owner_is_forbidden_and_nothing_changes(world: World, operation: str) -> None:
    before = _snapshot(world)
    with pytest.raises(Forbidden):
        OPERATIONS[operation](Admin(world.store, actor=BOB), world)
    assert _snapshot(world) == before


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_the_owner_may_do_what_owners_may_and_nothing_else(world: World, operation: str) -> None:
    act = OPERATIONS[operation]
    if operation in OWNERS_MAY:
        act(Admin(world.store, actor=ANN), world)
    else:
        before = _snapshot(world)
        with pytest.raises(Forbidden):
            act(Admin(world.store, actor=ANN), world)
        assert _snapshot(world) == before


# What only reads: a read-only operator may do these, as an operator, and nothing else.
READS = {"job", "jobs", "job_events", "progress", "dead_letters", "dead_letter", "dead_letter_facets", "queues",
         "finished_per_minute", "charts", "audit_trail", "schedules", "workers", "breaker_history", "breakers", "outbox",
         "workflow", "workflows", "workflow_steps"}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_read_only_operator_sees_everything_and_changes_nothing(world: World, operation: str) -> None:
    act, viewer = OPERATIONS[operation], Admin(world.store, actor=Actor.viewer("ops:vic"))
    if operation in READS:
        act(viewer, world)
    else:
        before = _snapshot(world)
        with pytest.raises(Forbidden, match="read-only operator"):
            act(viewer, world)
        assert _snapshot(world) == before


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_an_operator_may_do_everything(world: World, operation: str) -> None:
    OPERATIONS[operation](Admin(world.store, actor=OPS), world)


def test_actions_record_who_acted(world: World) -> None:
    ops = Admin(world.store, actor=OPS)
    ops.note(world.letter_id, "quota raised")
    (replay,) = ops.replay([world.letter_id])
    assert replay.job is not None and replay.job.status is Status.QUEUED
    letter = ops.dead_letter(world.letter_id)
    assert letter.notes[0]["by"] == letter.replayed_by == "ops:carol"
    assert world.store.job_events_list(job_id=world.failed.id)[-1].meta["by"] == "ops:carol"
    ops.open_breaker("gateway")
    assert world.store.breaker_events_list(name="gateway")[-1].by == "ops:carol"
    Admin(world.store, actor=ANN).cancel(world.waiting.id)
    assert world.store.job_get(job_id=world.waiting.id).status is Status.CANCELLED


def test_an_owner_lists_only_their_own_jobs(world: World) -> None:
    _enqueue(world.store, "bob")
    assert {j.owner for j in Admin(world.store, actor=ANN).jobs()} == {"ann"}
    assert {j.owner for j in Admin(world.store, actor=OPS).jobs()} == {"ann", "bob"}
    assert {j.owner for j in Admin(world.store, actor=OPS).jobs(owner="bob")} == {"bob"}


def test_a_retry_of_a_job_that_is_not_failed_is_refused(world: World) -> None:
    with pytest.raises(IllegalTransition, match="only a failed job"):
        Admin(world.store, actor=ANN).retry(world.waiting.id)


def test_without_the_app_a_replay_from_the_start_resumes_at_the_first_stage(store: Store) -> None:
    # The registry is optional: without it the job resumes "at the start",
    # which the executor reads as its first stage (no saved output).
    job = _enqueue(store, "ann")
    fail(store, claim_one(store), stage="t")
    (replay,) = Admin(store, actor=OPS).replay([letter_of(store, job.id).id], from_start=True)
    assert replay.job is not None and replay.job.checkpoint == {} and replay.job.stage is None


def test_forcing_an_unknown_breaker_names_the_known_ones_and_the_app_option(store: Store) -> None:
    store.breaker_update(name="gateway", change=lambda b, now: force_open(b, now))
    with pytest.raises(UnknownDependency, match=r"no breaker named 'gatway' \(known: gateway\).*--app"):
        Admin(store, actor=OPS).open_breaker("gatway")
    registry = Registry()
    app = App(store=store)
    with pytest.raises(UnknownDependency, match="no dependency named 'mailer'"):
        Admin(store, actor=OPS, registry=registry).open_breaker("mailer")
    with app.admin(OPS) as ops:
        assert ops.close_breaker("gateway").state == "closed"


def test_revealing_arguments_is_put_on_record(world: World) -> None:
    ops = Admin(world.store, actor=OPS)
    assert ops.audit_trail(world.failed.id) == []
    job = ops.reveal(world.failed.id)
    (entry,) = ops.audit_trail(job.id)
    assert (entry.by, entry.action, entry.job_id) == ("ops:carol", "reveal", job.id)


def test_a_letter_named_twice_is_resolved_and_answered_once(world: World) -> None:
    ops = Admin(world.store, actor=OPS)
    (done,) = ops.resolve([world.letter_id, str(world.letter_id), world.letter_id], note="handled")
    assert done.resolved and done.letter.state == "resolved"
    (again,) = ops.resolve([world.letter_id])
    assert not again.resolved and again.letter.state == "resolved"
