"""What a test asserts of the workflows its code created (``create_workflow``)
or a task spawned (``redrive.spawn``):

    drain(app)
    wf = assert_workflow(app, spawned_by=job, status="succeeded", steps={"parts": 4, "summary": 1})
    jobs = workflow_jobs(app, wf)          # each step's jobs by name, a fan-out's in order
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from redrive.app import App
from redrive.core.job import Job
from redrive.core.workflow import WorkflowCreated, WorkflowState
from redrive.errors import ConfigError

_AT_MOST = 10_000  # workflows a test reads


def workflows_created(app: App, *, name: str | None = None, spawned_by: UUID | str | Job | None = None
                      ) -> list[WorkflowState]:
    """The app's workflows, oldest first: those named ``name``, or spawned by
    the job ``spawned_by`` (a job or its id), when given."""
    spawner = _id(spawned_by)
    found: list[WorkflowState] = []
    after = None
    while len(found) < _AT_MOST:
        page = app.store.workflows_page(after=after, limit=500)
        found += page.items
        if not page.more:
            break
        after = page.next_cursor
    found.reverse()  # the store lists newest first
    return [w for w in found if (name is None or w.name == name) and (spawner is None or w.spawned_by == spawner)]


def assert_workflow(app: App, *, name: str | None = None, spawned_by: UUID | str | Job | None = None,
                    status: str | None = None, steps: Mapping[str, int] | None = None) -> WorkflowState:
    """Fail the test unless exactly one workflow matches ``name`` and
    ``spawned_by``; then unless it is in ``status`` (running, blocked,
    succeeded, failed, cancelled) and has, for each step name of ``steps``,
    that many jobs. The message says what was created instead. Returns it."""
    found = workflows_created(app, name=name, spawned_by=spawned_by)
    if len(found) != 1:
        seen = "; ".join(f"{w.name!r} ({w.status.value})" for w in workflows_created(app)[:10]) or "none"
        raise AssertionError(f"expected one workflow{_which(name, spawned_by)}, found {len(found)}; "
                             f"workflows created: {seen}")
    (workflow,) = found
    if status is not None and workflow.status.value != status:
        raise AssertionError(f"workflow {workflow.name!r} is {workflow.status.value}, not {status}; "
                             f"its steps: {_counts(workflow)}")
    if steps is not None:
        have = {step: sum(by_status.values()) for step, by_status in workflow.counts.items()}
        if have != dict(steps):
            raise AssertionError(f"workflow {workflow.name!r} has steps {have}, not {dict(steps)}")
    return workflow


def workflow_jobs(app: App, workflow: WorkflowState | WorkflowCreated | UUID | str) -> dict[str, list[Job]]:
    """Each step's jobs by step name (a fan-out's in the order declared), as stored now."""
    workflow_id = workflow.id if isinstance(workflow, WorkflowState | WorkflowCreated) else _id(workflow)
    if workflow_id is None:
        raise ConfigError("workflow_jobs needs a workflow or its id")
    jobs: dict[str, list[Job]] = {}
    for step, ids in app.store.workflow_steps(id=workflow_id).items():
        jobs[step] = [job for job_id in ids if (job := app.store.job_get(job_id=job_id)) is not None]
    return jobs


def _id(value: UUID | str | Job | None) -> UUID | None:
    if value is None or isinstance(value, UUID):
        return value
    return value.id if isinstance(value, Job) else UUID(str(value))


def _which(name: str | None, spawned_by: Any) -> str:
    said = [f"named {name!r}"] if name is not None else []
    said += [f"spawned by {spawned_by.id if isinstance(spawned_by, Job) else spawned_by}"] if spawned_by else []
    return (" " + " and ".join(said)) if said else ""


def _counts(workflow: WorkflowState) -> str:
    return "; ".join(f"{step}: " + ", ".join(f"{n} {s.value}" for s, n in by_status.items() if n)
                     for step, by_status in workflow.counts.items())
