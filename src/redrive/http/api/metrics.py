"""``/metrics`` (operators): Prometheus' text format, with the metrics extra."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
from fastapi import APIRouter, Request, Response

from redrive.http.api.callers import CallerFirst, Operator
from redrive.http.surface import surface

router = APIRouter(route_class=CallerFirst, tags=["metrics"])


# Errors stay JSON: only the answer itself is Prometheus' text format.
@router.get("/metrics", response_model=None,
            responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}})
def metrics_text(request: Request, ops: Operator) -> Response:
    """Prometheus metrics (docs/observability.md); scrape with an operator token."""
    from redrive.metrics import CONTENT_TYPE

    return Response(surface(request).metrics.exposition(), media_type=CONTENT_TYPE)
