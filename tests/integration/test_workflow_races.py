"""Two parents of one child ending at the same instant on two processes,
1,000 times on each store: the child is released exactly once every time,
never left waiting, never released twice (the child's step row serializes
the two endings). And one workflow key created by ten processes at once
makes one workflow."""

from __future__ import annotations

import multiprocessing
import uuid

import pytest

from redrive.core.states import Status
from redrive.core.workflow import NewEdge, NewStep, NewWorkflow
from redrive.store.reads import JobFilter
from redrive.store.url import open_store
from redrive.testing import new
from tests.figures import record
from tests.integration.racing import create_keyed, end_parents

ROUNDS = 1000


def _pair(round: int) -> tuple[NewWorkflow, uuid.UUID]:
    """a (queue left) and b (queue right) -> c; the round is the parents'
    priority, so both processes claim the parents of one workflow at a time."""
    a, b = new(task="a", queue="left", priority=round), new(task="b", queue="right", priority=round)
    c = new(task="c", queue="joined")
    c.waits = True
    return NewWorkflow(uuid.uuid4(), "race", (NewStep(a, "a"), NewStep(b, "b"), NewStep(c, "c")),
                       (NewEdge(a.id, c.id), NewEdge(b.id, c.id)), {"a": [], "b": [], "c": [("a", "succeeded"), ("b", "succeeded")]}), c.id


@pytest.mark.slow  # two processes, 1,000 rounds each
def test_two_parents_ending_at_once_release_their_child_exactly_once(db_url: str) -> None:
    store = open_store(db_url)
    children = []
    for round in range(ROUNDS):
        workflow, child = _pair(round)
        store.workflow_insert(workflow=workflow)
        children.append(child)
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(2)
    racers = [spawn.Process(target=end_parents, args=(db_url, queue, ROUNDS, barrier)) for queue in ("left", "right")]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=300)
    assert [racer.exitcode for racer in racers] == [0, 0]
    releases = [sum(e.from_status is Status.PENDING for e in store.job_events_list(job_id=c)) for c in children]
    statuses = {store.job_get(job_id=c).status for c in children}
    store.close()
    store_name = db_url.split(":")[0]
    record(f"workflow races ({store_name})", "children released exactly once", f"{releases.count(1)} of {ROUNDS}",
           f"{ROUNDS} of {ROUNDS}")
    assert statuses == {Status.QUEUED}
    assert releases.count(1) == ROUNDS, {n: releases.count(n) for n in set(releases)}


def test_one_key_created_by_ten_processes_at_once_makes_one_workflow(db_url: str) -> None:
    spawn = multiprocessing.get_context("spawn")
    barrier, answers = spawn.Barrier(10), spawn.Queue()
    creators = [spawn.Process(target=create_keyed, args=(db_url, "daily-2026-11-29", barrier, answers))
                for _ in range(10)]
    for creator in creators:
        creator.start()
    got = [answers.get(timeout=120) for _ in creators]
    for creator in creators:
        creator.join(timeout=60)
    assert [c.exitcode for c in creators] == [0] * 10
    assert len({workflow_id for workflow_id, _ in got}) == 1
    assert sorted(duplicate for _, duplicate in got) == [False] + [True] * 9
    store = open_store(db_url)
    try:
        assert len(store.jobs_page(where=JobFilter(), limit=100).items) == 2  # one workflow's two steps
    finally:
        store.close()
