"""``/api/v1/workers`` and ``/api/v1/audit`` (operators): who works, and
what operators did."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
from redrive.http import responses as out
from redrive.http.api.callers import Answer, Operator, resource
from redrive.views import audit_view, workers_view

router = resource("workers")
audit_router = resource("audit")


@router.get("/workers", response_model=out.Workers)
def workers(ops: Operator) -> Answer:
    """Every registered worker, oldest first; ``stale``: it missed three heartbeats."""
    found, now = ops.workers()
    return {"items": workers_view(found, now)}


@audit_router.get("/audit", response_model=out.Audit)
def audit(ops: Operator) -> Answer:
    """What operators did to no one job (queue pauses and resumes, bulk
    actions with their filter and count), the latest 1,000, oldest first."""
    return {"items": [audit_view(entry) for entry in ops.audit_trail()]}
