"""``/api/v1/workflows``: list, read, cancel a whole workflow, retry every
failed step of one. A workflow belongs to its owner, as a job does: an
owner sees and acts on their own."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
from typing import Annotated

from fastapi import Query

from redrive.http import responses as out
from redrive.http.api.callers import Acting, Answer, resource
from redrive.http.models import Strict
from redrive.views import job_view, page_view, workflow_view

router = resource("workflows")


@router.get("/workflows", response_model=out.Workflows)
def workflows(ops: Acting, limit: Annotated[int, Query(ge=1)] = 50, cursor: str | None = None) -> Answer:
    """The newest workflows, newest first, a page at a time (``cursor``: the
    last page's ``next_cursor``; ``limit`` is clamped): an owner sees their own."""
    return page_view(ops.workflows(after=cursor, limit=limit), workflow_view)


@router.get("/workflows/{workflow_id}", response_model=out.Workflow)
def workflow(workflow_id: str, ops: Acting) -> Answer:
    """The workflow: its status, its steps by name with their edges and their jobs' counts by status."""
    return workflow_view(ops.workflow(workflow_id))


@router.post("/workflows/{workflow_id}/cancel", response_model=out.Workflow)
def cancel(workflow_id: str, ops: Acting, body: Strict | None = None) -> Answer:
    """Nothing in it starts afterwards: waiting steps end cancelled now,
    running ones are asked to stop; the workflow ends cancelled."""
    return workflow_view(ops.cancel_workflow(workflow_id))


@router.post("/workflows/{workflow_id}/retry", response_model=out.Jobs)
def retry(workflow_id: str, ops: Acting, body: Strict | None = None) -> Answer:
    """Every failed step runs again; the steps their failures blocked wait
    for them again, and nothing that succeeded runs again. Answers the steps retried."""
    return {"items": [job_view(job) for job in ops.retry_workflow(workflow_id)]}
