"""The JSON API under /api/v1: what a principal may see and do, through the
same ``Client``, ``Admin`` and views as the CLI. A module per resource, each
with its router; a route is a plain function that reads the app's state
(``redrive.http.surface``). Store calls block, and FastAPI runs the routes
on its threads. Adding a resource is a module and one line in ``_RESOURCES``."""

from __future__ import annotations

from fastapi import APIRouter

from redrive.http import responses as out
from redrive.http.api import breakers, dead_letters, health, jobs, outbox, queues, schedules, workers, workflows

__all__ = ["health", "routes"]

_RESOURCES = (jobs.router, dead_letters.router, breakers.router, queues.router, workers.audit_router,
              workers.router, schedules.router, outbox.router, workflows.router)


def routes(*, metrics: bool) -> APIRouter:
    """Every resource's routes (and ``/metrics`` with the metrics extra),
    each declaring the errors any route may answer."""
    root = APIRouter(responses=out.ERRORS)
    for router in _RESOURCES:
        root.include_router(router)
    if metrics:
        from redrive.http.api import metrics as prometheus

        root.include_router(prometheus.router)
    return root
