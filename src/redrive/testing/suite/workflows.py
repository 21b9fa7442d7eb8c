"""Workflows (core/workflow.py): a step waits, invisible to the claim, until
its last parent's final ending releases it in the transaction that writes
that ending; every parent outcome under every edge policy gives the
documented child state; a blocked step waits again when its failed parent is
retried or replayed; a late write from a lost lease releases nothing; a
1,000-way fan-in releases its join once; a cancelled workflow starts nothing."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta

import pytest

from redrive.core.job import Job
from redrive.core.states import Status
from redrive.core.transitions import Cancellation, Completion, FailNow, Finished, RetryLater
from redrive.core.workflow import (
    EdgeState,
    NewEdge,
    NewStep,
    NewWorkflow,
    Policy,
    WorkflowStatus,
    edge_state,
    step_status,
)
from redrive.store.operations import FullStore
from redrive.testing import (
    Clock,
    applied,
    assert_history,
    claim,
    claim_one,
    fail,
    letter_of,
    new,
    reclaim,
    revive,
    wait_for,
)


def flow(graph: Mapping[str, Sequence[tuple[str, str]]], *, fan: Mapping[str, int] | None = None,
         key: str | None = None, owner: str | None = None) -> tuple[NewWorkflow, dict[str, list[uuid.UUID]]]:
    """A workflow of ``graph`` (step -> [(parent, policy)]), each step one job
    or, in ``fan``, that many; and the job ids of each step."""
    fan = fan or {}
    ids: dict[str, list[uuid.UUID]] = {}
    steps, edges = [], []
    for name, parents in graph.items():
        fanned = name in fan
        ids[name] = []
        for position in range(fan.get(name, 1)):
            job = new(task=name, owner=owner)
            job.waits = any(ids[p] for p, _ in parents)
            ids[name].append(job.id)
            steps.append(NewStep(job, name, position if fanned else None))
            edges += [NewEdge(parent, job.id, Policy(policy)) for p, policy in parents for parent in ids[p]]
    return NewWorkflow(uuid.uuid4(), "wf", tuple(steps), tuple(edges),
                       {k: list(v) for k, v in graph.items()}, owner, key), ids


def status_of(store: FullStore, job_id: uuid.UUID) -> Status:
    job = store.job_get(job_id=job_id)
    assert job is not None
    return job.status


def run(store: FullStore, job_id: uuid.UUID, result: object = None) -> Job:
    """Claim ``job_id`` (the only job due) and complete it."""
    (job,) = claim(store)
    assert job.id == job_id, f"claimed {job.task}, not the step expected"
    assert applied(store.jobs_finish([Completion(job.lease, result)])) == {job.lease}
    return job


def test_a_chain_runs_each_step_after_the_one_before_it(store: FullStore) -> None:
    wf, ids = flow({"a": [], "b": [("a", "succeeded")], "c": [("b", "succeeded")]})
    created = store.workflow_insert(workflow=wf)
    assert not created.duplicate and created.steps == {k: tuple(v) for k, v in ids.items()}
    assert [status_of(store, ids[s][0]) for s in "abc"] == [Status.QUEUED, Status.PENDING, Status.PENDING]
    run(store, ids["a"][0], "A")
    assert status_of(store, ids["b"][0]) is Status.QUEUED
    assert claim(store, 10) and not claim(store, 10)  # b alone is due: c still waits
    workflow = store.workflow_get(id=wf.id)
    assert workflow is not None and workflow.status is WorkflowStatus.RUNNING
    for name in "abc":
        assert_history(store, ids[name][0])


def test_a_pending_step_is_never_claimed_and_spends_no_attempt(store: FullStore) -> None:
    wf, ids = flow({"a": [], "b": [("a", "succeeded")]})
    store.workflow_insert(workflow=wf)
    (a,) = claim(store, 10)
    assert a.id == ids["a"][0] and not claim(store, 10)
    store.jobs_finish([Completion(a.lease, None)])
    b = claim_one(store)
    assert (b.id, b.attempts) == (ids["b"][0], 1)
    events = [(e.from_status, e.to_status) for e in store.job_events_list(job_id=b.id)]
    assert events == [(None, Status.PENDING), (Status.PENDING, Status.QUEUED), (Status.QUEUED, Status.RUNNING)]


OUTCOMES = ("succeeded", "failed", "cancelled while running", "cancelled while queued")


def _end_parent(store: FullStore, job_id: uuid.UUID, outcome: str) -> None:
    if outcome == "cancelled while queued":
        (done,) = store.jobs_cancel(job_ids=[job_id], by="ops")
        assert done is not None and done.status is Status.CANCELLED
        return
    job = claim_one(store)
    assert job.id == job_id
    if outcome == "succeeded":
        item = Completion(job.lease, 1)
    elif outcome == "failed":
        item = FailNow(job.lease, "BAD_INPUT", "no")
    else:
        item = Cancellation(job.lease, by="ops")
    assert applied(store.jobs_finish([item])) == {job.lease}


@pytest.mark.parametrize("policy", list(Policy), ids=str)
@pytest.mark.parametrize("outcome", OUTCOMES)
def test_every_parent_outcome_under_every_policy_gives_the_documented_child_state(
    store: FullStore, outcome: str, policy: Policy,
) -> None:
    wf, ids = flow({"parent": [], "child": [("parent", policy.value)]})
    store.workflow_insert(workflow=wf)
    _end_parent(store, ids["parent"][0], outcome)
    ending = Status.CANCELLED if outcome.startswith("cancelled") else Status(outcome)
    expected = step_status(0, int(edge_state(policy, ending) is EdgeState.BLOCKING))
    # the table docs/workflows.md states, spelled out
    documented = {Policy.SUCCEEDED: {Status.SUCCEEDED: Status.QUEUED},
                  Policy.NOT_FAILED: {Status.SUCCEEDED: Status.QUEUED, Status.CANCELLED: Status.QUEUED},
                  Policy.ENDED: dict.fromkeys(Status, Status.QUEUED)}[policy].get(ending, Status.BLOCKED)
    assert expected is documented
    assert status_of(store, ids["child"][0]) is documented
    assert_history(store, ids["child"][0])


def test_a_retry_scheduled_is_not_an_ending_and_releases_nothing(store: FullStore) -> None:
    wf, ids = flow({"a": [], "b": [("a", "succeeded")]})
    store.workflow_insert(workflow=wf)
    a = claim_one(store)
    store.jobs_finish([RetryLater(a.lease, timedelta(0), "UPSTREAM_5XX", "503")])
    assert status_of(store, ids["b"][0]) is Status.PENDING
    run(store, ids["a"][0])
    assert status_of(store, ids["b"][0]) is Status.QUEUED


@pytest.mark.parametrize("how", ["retry", "dead letter replayed"])
def test_a_blocked_step_runs_once_after_its_failed_parent_is_revived(store: FullStore, how: str) -> None:
    wf, ids = flow({"a": [], "b": [("a", "succeeded")], "c": [("b", "succeeded")]})
    store.workflow_insert(workflow=wf)
    run(store, ids["a"][0])
    b = claim_one(store)
    fail(store, b, "BAD_INPUT")
    assert status_of(store, ids["c"][0]) is Status.BLOCKED
    workflow = store.workflow_get(id=wf.id)
    assert workflow is not None and workflow.status is WorkflowStatus.BLOCKED
    letter = letter_of(store, b.id).id if how == "dead letter replayed" else None
    assert revive(store, b.id, "fixed", "ops", dead_letter_id=letter) is not None
    assert status_of(store, ids["c"][0]) is Status.PENDING
    run(store, ids["b"][0])  # b again; a does not run again
    run(store, ids["c"][0])
    assert not claim(store, 10)
    workflow = store.workflow_get(id=wf.id)
    assert workflow is not None and workflow.status is WorkflowStatus.SUCCEEDED
    assert workflow.counts["a"] == {Status.SUCCEEDED: 1}
    assert_history(store, ids["c"][0])


def test_a_late_result_from_a_lost_lease_releases_nothing(store: FullStore) -> None:
    wf, ids = flow({"a": [], "b": [("a", "succeeded")]})
    store.workflow_insert(workflow=wf)
    first = claim_one(store, ttl=timedelta(milliseconds=300))
    assert wait_for(lambda: reclaim(store), timeout=5) == [first.id]  # back to the queue, attempt spent
    second = claim_one(store)
    assert applied(store.jobs_finish([Completion(second.lease, "second")])) == {second.lease}
    assert applied(store.jobs_finish([Completion(first.lease, "late")])) == set()
    b = claim_one(store)
    assert b.id == ids["b"][0] and not claim(store, 10)
    events = [e.to_status for e in store.job_events_list(job_id=b.id)]
    assert events.count(Status.QUEUED) == 1


def test_a_fan_in_of_a_thousand_releases_its_join_once_with_every_result(store: FullStore) -> None:
    wf, ids = flow({"part": [], "join": [("part", "succeeded")]}, fan={"part": 1000})
    store.workflow_insert(workflow=wf)
    for batch in range(10):
        parts = claim(store, 100)
        assert {j.task for j in parts} == {"part"} and len(parts) == 100
        store.jobs_finish([Completion(j.lease, ids["part"].index(j.id)) for j in parts])
        expected = Status.QUEUED if batch == 9 else Status.PENDING
        assert status_of(store, ids["join"][0]) is expected
    join = store.job_get(job_id=ids["join"][0])
    assert join is not None and join.status in (Status.QUEUED, Status.RUNNING)
    parents = store.step_parents(job_id=join.id)
    assert [p.result for p in parents] == list(range(1000))
    assert {p.name for p in parents} == {"part"} and [p.position for p in parents] == list(range(1000))
    releases = [e for e in store.job_events_list(job_id=join.id) if e.to_status is Status.QUEUED]
    assert len(releases) == 1


def test_the_same_key_makes_one_workflow(store: FullStore) -> None:
    first, _ = flow({"a": []}, key="daily-2026-11-29", owner="team-a")
    again, _ = flow({"a": []}, key="daily-2026-11-29", owner="team-a")
    other, _ = flow({"a": []}, key="daily-2026-11-29", owner="team-b")
    made = store.workflow_insert(workflow=first)
    twin = store.workflow_insert(workflow=again)
    assert (twin.id, twin.duplicate, twin.steps) == (made.id, True, made.steps)
    assert not store.workflow_insert(workflow=other).duplicate
    assert len(claim(store, 10)) == 2  # one job for each owner's workflow


def test_a_cancelled_workflow_starts_nothing_and_asks_its_running_steps_to_stop(store: FullStore) -> None:
    wf, ids = flow({"a": [], "b": [], "c": [("a", "succeeded"), ("b", "succeeded")],
                    "d": [("c", "ended")]})
    store.workflow_insert(workflow=wf)
    a = claim_one(store)  # a root runs, the other root waits in the queue
    waiting = ids["b"][0] if a.id == ids["a"][0] else ids["a"][0]
    assert store.workflow_cancel(id=wf.id, by="ops")
    assert status_of(store, waiting) is Status.CANCELLED
    assert status_of(store, ids["c"][0]) is Status.CANCELLED
    assert status_of(store, ids["d"][0]) is Status.CANCELLED
    assert store.control_read(job_ids=[a.id]).cancels == {a.id: "ops"}
    store.jobs_finish([Completion(a.lease, None)])  # it ran on anyway: still nothing starts
    assert not claim(store, 10)
    workflow = store.workflow_get(id=wf.id)
    assert workflow is not None and workflow.status is WorkflowStatus.CANCELLED
    assert workflow.cancelled_by == "ops"
    assert not store.workflow_cancel(id=uuid.uuid4(), by="ops")
    for name in "abcd":
        assert_history(store, ids[name][0])


def test_pruning_keeps_a_parent_while_a_step_after_it_waits(store: FullStore) -> None:
    wf, ids = flow({"a": [], "b": [("a", "succeeded")]})
    store.workflow_insert(workflow=wf)
    run(store, ids["a"][0], "A")
    assert store.jobs_prune(older_than=timedelta(0)) == 0  # b has not run: a's result is still needed
    b = claim_one(store)
    assert [p.result for p in store.step_parents(job_id=b.id)] == ["A"]
    store.jobs_finish([Completion(b.lease, None)])
    assert store.jobs_prune(older_than=timedelta(0)) == 2
    assert store.job_get(job_id=ids["a"][0]) is None and store.workflow_jobs(id=wf.id) == []


def test_a_success_creates_what_its_run_spawned_in_its_own_ending_and_nothing_else_does(store: FullStore) -> None:
    spawner = store.jobs_insert(jobs=[new(task="split")])[0].job.id
    job = claim_one(store)
    children, ids = flow({"part": [], "join": [("part", "succeeded")]}, fan={"part": 3})
    children = replace(children, spawned_by=spawner)
    # a retry, and a late success from a lost lease, create nothing
    assert applied(store.jobs_finish([RetryLater(job.lease, timedelta(0), "UPSTREAM_5XX", "502")])) == {job.lease}
    assert store.workflow_get(id=children.id) is None
    again = claim_one(store)
    assert applied(store.jobs_finish([Completion(job.lease, "late", {}, (children,))])) == set()
    assert store.workflow_get(id=children.id) is None and store.job_get(job_id=ids["join"][0]) is None
    # the success that holds the lease creates them, in a batch with a plain ending
    other = store.jobs_insert(jobs=[new(task="plain")])[0].job.id
    plain = claim_one(store)
    assert plain.id == other
    done = store.jobs_finish([Completion(again.lease, "split", {}, (children,)), Completion(plain.lease, None)])
    assert [(f.lease.job_id, f.status) for f in done] == [(spawner, Status.SUCCEEDED), (other, Status.SUCCEEDED)]
    made = store.workflow_get(id=children.id)
    assert made is not None and made.spawned_by == spawner and made.status is WorkflowStatus.RUNNING
    assert made.counts["part"] == {Status.QUEUED: 3} and made.counts["join"] == {Status.PENDING: 1}
    # its steps run as any workflow's: the join once, after all three parts
    for part in claim(store, 10):
        applied(store.jobs_finish([Completion(part.lease, None)]))
    run(store, ids["join"][0])
    finished = store.workflow_get(id=children.id)
    assert finished is not None and finished.status is WorkflowStatus.SUCCEEDED


def _changes(done: Sequence[Finished]) -> list[tuple[str, int]]:
    return [(c.became, c.blocked) for f in done for c in f.workflows]


def test_the_ending_that_ends_or_blocks_a_workflow_says_so_once(store: FullStore) -> None:
    wf, ids = flow({"a": [], "b": [("a", "succeeded")], "c": [("a", "ended")]})
    store.workflow_insert(workflow=wf)
    (a,) = claim(store)
    failed = store.jobs_finish([FailNow(a.lease, "BAD_INPUT", "no")])
    # b is blocked (told on a's ending, with the workflow's id and name); c, a finally step, runs
    assert [(c.workflow_id, c.name, c.became, c.blocked) for f in failed for c in f.workflows] == [
        (wf.id, "wf", "blocked", 1)]
    (c,) = claim(store)
    assert c.id == ids["c"][0]
    assert _changes(store.jobs_finish([Completion(c.lease, None)])) == [], "b is open: the workflow goes on"
    assert revive(store, ids["a"][0], "manual_retry", "ops") is not None  # b waits on a again
    (again,) = claim(store)
    assert _changes(store.jobs_finish([Completion(again.lease, None)])) == []
    (b,) = claim(store)
    assert _changes(store.jobs_finish([Completion(b.lease, None)])) == [("succeeded", 0)]


@pytest.mark.parametrize(("ending", "became"), [("fail", "failed"), ("cancel", "cancelled")])
def test_a_fan_in_ended_in_one_batch_tells_how_its_workflow_ended_once(store: FullStore, ending: str,
                                                                          became: str) -> None:
    wf, ids = flow({"part": [], "last": [("part", "ended")]}, fan={"part": 4})
    store.workflow_insert(workflow=wf)
    parts = claim(store, 10)
    end = FailNow(parts[0].lease, "BAD_INPUT", "no") if ending == "fail" else Cancellation(parts[0].lease, by="ops")
    done = store.jobs_finish([end, *(Completion(p.lease, None) for p in parts[1:])])
    assert _changes(done) == []  # the finally step is open: nothing ended yet
    (last,) = claim(store)
    told = store.jobs_finish([Completion(last.lease, None)])
    assert [(f.lease.job_id, c.became) for f in told for c in f.workflows] == [(ids["last"][0], became)]
    state = store.workflow_get(id=wf.id)
    assert state is not None and state.status.value == became


def test_workflows_come_a_page_at_a_time_newest_first_with_their_counts(timed_store: FullStore, clock: Clock) -> None:
    store, made = timed_store, []
    for n in range(5):
        wf, _ = flow({"a": [], "b": [("a", "succeeded")]}, owner="ann" if n % 2 else None)
        store.workflow_insert(workflow=wf)
        made.append(wf.id)
        clock.advance(timedelta(seconds=1))
    seen, after, pages = [], None, 0
    while True:
        page = store.workflows_page(after=after, limit=2)
        seen += page.items
        pages += 1
        if not page.more:
            break
        after = page.next_cursor
    assert [w.id for w in seen] == made[::-1] and pages == 3
    assert all(w.counts == {"a": {Status.QUEUED: 1}, "b": {Status.PENDING: 1}} for w in seen)
    assert [w.id for w in store.workflows_page(owner="ann")] == [made[3], made[1]]
