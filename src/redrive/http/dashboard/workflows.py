"""The workflows list, a workflow's page (its graph, each step's jobs by
status, links to the jobs), and the actions on a workflow: cancel it,
retry every failed step."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from redrive.admin import Admin
from redrive.http.dashboard.base import action, number, page
from redrive.http.dashboard.graph import drawn
from redrive.http.dashboard.render import base_of
from redrive.store.reads import page_size
from redrive.views import workflow_view

router = APIRouter(include_in_schema=False)
_LINKED = 50  # a fan-out's members linked on its page; the rest are counted


@router.get("/workflows")
def workflows(request: Request) -> Response:
    def build(request: Request, admin: Admin) -> dict[str, Any]:
        found = admin.workflows(limit=page_size(number(request.query_params.get("limit"), 50)))
        return {"title": "Workflows", "workflows": [workflow_view(w) for w in found]}

    return page(request, "workflows.html", "workflows", build)


@router.get("/workflows/{workflow_id}")
def workflow(request: Request) -> Response:
    def build(request: Request, admin: Admin) -> dict[str, Any]:
        found = admin.workflow(request.path_params["workflow_id"])
        jobs = admin.workflow_steps(found.id)
        shown = workflow_view(found)
        for step in shown["steps"]:
            ids = jobs.get(step["name"], ())
            step["jobs"] = [str(job_id) for job_id in ids[:_LINKED]]  # type: ignore[typeddict-unknown-key]
            step["more"] = max(len(ids) - _LINKED, 0)  # type: ignore[typeddict-unknown-key]
        return {"title": f"Workflow {found.name}", "workflow": shown, "graph": drawn(shown, jobs, base_of(request))}

    return page(request, "workflow.html", "workflows", build)


@router.post("/workflows/{workflow_id}/cancel")
def cancel(request: Request, workflow_id: str, csrf: str = Form("")) -> Response:
    return action(request, csrf, lambda a: (a.cancel_workflow(workflow_id), ("workflow_cancelled", {}))[1],
                  f"/workflows/{workflow_id}")


@router.post("/workflows/{workflow_id}/retry")
def retry(request: Request, workflow_id: str, csrf: str = Form("")) -> Response:
    return action(request, csrf, lambda a: ("workflow_retried", {"n": len(a.retry_workflow(workflow_id))}),
                  f"/workflows/{workflow_id}")
