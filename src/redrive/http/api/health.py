"""``/healthz`` (the process answers) and ``/readyz`` (its store answers, its
schema current): for a load balancer or Kubernetes, without a token."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from redrive.errors import RedriveError
from redrive.http import responses as out
from redrive.http.api.callers import Answer
from redrive.http.errors import error
from redrive.http.surface import surface

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=out.Health)
def healthz() -> Answer:
    """The process answers."""
    return {"status": "ok"}


@router.get("/readyz", response_model=out.Health, responses={503: out.ERRORS[503]})
def readyz(request: Request) -> Answer | JSONResponse:
    """The store answers and its schema is current."""
    try:
        if not surface(request).app.store.schema_current():
            return error(503, "SCHEMA_OUTDATED", "migrations are pending: run `redrive migrate`")
    except RedriveError as exc:
        return error(503, exc.code, exc.message)
    return {"status": "ready"}
