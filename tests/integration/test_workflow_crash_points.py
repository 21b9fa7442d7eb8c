"""A worker SIGKILLed at each point of a workflow parent's ending: before its
transaction, inside it, after its commit and before the worker hears back
(tests/apps/workflow_crashing.py). The child is released exactly when the
ending committed: right after the kill it is still pending unless the
ending had committed; once a healthy worker has finished, it was released
once and ended once. The same for a job that spawns children: they exist
exactly when its success committed, and are created once however often it
ran (tests/apps/spawn_crashing.py)."""

from __future__ import annotations

import subprocess

import pytest

from redrive import Actor, Admin, Client, Settings, Status, Workflow, WorkflowStatus
from redrive.core.states import TERMINAL
from redrive.testing import wait_for
from tests.apps.drain import app as drain_app
from tests.apps.drain import record, split
from tests.integration.processes import WorkerProcess, executions

APP = "tests.apps.workflow_crashing:app"


@pytest.mark.parametrize("point", ["before", "inside", "after"])
def test_a_child_is_released_once_exactly_when_its_parents_ending_commits(
    db_url: str, tmp_path, workers, point: str,
) -> None:
    client = Client(drain_app.registry, settings=Settings.load(database_url=db_url))
    wf = Workflow("crash")
    parent = wf.add(record.call("parent"))
    wf.add(record.call("child"), after=parent)
    created = client.create_workflow(wf)
    parent_id, child_id = created.steps["record"][0], created.steps["record-2"][0]
    dying = WorkerProcess(db_url, tmp_path, "--lease-ttl", "2s", "--poll-interval", "0.1", app=APP,
                          env={"REDRIVE_TEST_CRASH_AT": point})
    workers.append(dying)
    try:
        assert dying.process.wait(timeout=60) == -9, "the worker never reached the crash point"
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker never reached {point}")
    with Admin.open(db_url, actor=Actor.operator("test")) as admin:
        committed = point == "after"
        child = admin.store.job_get(job_id=child_id)
        # released (and maybe claimed by the dying worker in the instant left) only if committed
        assert child is not None and (child.status is not Status.PENDING) is committed, child.status
        workers.append(WorkerProcess(db_url, tmp_path, "--lease-ttl", "2s", "--poll-interval", "0.1", app=APP))
        wait_for(lambda: admin.store.job_get(job_id=child_id).status is Status.SUCCEEDED, timeout=60,
                 what="the child's success")
        parent_events = admin.store.job_events_list(job_id=parent_id)
        child_events = admin.store.job_events_list(job_id=child_id)
    client.close()
    assert sum(e.to_status in TERMINAL for e in parent_events) == 1
    assert sum(e.to_status in TERMINAL for e in child_events) == 1
    # released once (a run the dying worker began is taken back: running -> queued, not a release)
    assert [(e.from_status, e.to_status) for e in child_events if e.from_status is Status.PENDING] == [
        (Status.PENDING, Status.QUEUED)]
    ran = executions(tmp_path)
    assert ran["parent"] == (1 if committed else 2) and ran["child"] >= 1


@pytest.mark.parametrize("point", ["before", "inside", "after"])
def test_a_spawners_children_are_created_once_exactly_when_its_success_commits(
    db_url: str, tmp_path, workers, point: str,
) -> None:
    client = Client(drain_app.registry, settings=Settings.load(database_url=db_url))
    spawner = client.enqueue(split, args=["s", 3]).job
    dying = WorkerProcess(db_url, tmp_path, "--lease-ttl", "2s", "--poll-interval", "0.1",
                          app="tests.apps.spawn_crashing:app", env={"REDRIVE_TEST_CRASH_AT": point})
    workers.append(dying)
    try:
        assert dying.process.wait(timeout=60) == -9, "the worker never reached the crash point"
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker never reached {point}")
    committed = point == "after"
    with Admin.open(db_url, actor=Actor.operator("test")) as admin:
        assert len(admin.workflows()) == int(committed), "children exist exactly when the success committed"
        workers.append(WorkerProcess(db_url, tmp_path, "--lease-ttl", "2s", "--poll-interval", "0.1", app=APP))

        def spawned_and_done() -> bool:
            found = admin.workflows()
            return len(found) == 1 and found[0].status is WorkflowStatus.SUCCEEDED

        wait_for(spawned_and_done, timeout=60, what="the spawned workflow's success")
        (children,) = admin.workflows()
        events = admin.store.job_events_list(job_id=spawner.id)
        assert children.spawned_by == spawner.id and children.counts["parts"] == {Status.SUCCEEDED: 3}
        assert sum(e.to_status in TERMINAL for e in events) == 1
        steps = admin.store.workflow_steps(id=children.id)
        endings = [sum(e.to_status in TERMINAL for e in admin.store.job_events_list(job_id=job_id))
                   for ids in steps.values() for job_id in ids]
    client.close()
    ran = executions(tmp_path)
    assert ran["s"] == (1 if committed else 2)
    assert endings == [1, 1, 1, 1], "each child and the join ended once"
    # a child the dying worker took in the instant left runs again (at least once); the join runs once
    assert ran["s-join"] == 1 and all(ran[f"s-{n}"] >= 1 for n in range(3)), ran
