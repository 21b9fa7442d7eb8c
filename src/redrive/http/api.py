"""The JSON API under /api/v1: what a principal may see and do, through the
same ``Client``, ``Admin`` and views as the CLI. Every route is a plain
function: store calls block, and FastAPI runs them on its threads."""

# No ``from __future__ import annotations``: FastAPI reads the routes'
# annotations, and ``Depends(actor)`` names a function local to ``routes``.
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from redrive.admin import Actor, Admin
from redrive.app import App
from redrive.core.states import Status
from redrive.errors import Forbidden, RedriveError
from redrive.http.auth import Auth
from redrive.http.errors import Unauthorized, error
from redrive.http.models import EnqueueBody, Strict
from redrive.store.reads import page_size
from redrive.views import event_view, job_view, page_view

JSON = dict[str, Any]


def routes(app: App, auth: Auth) -> APIRouter:
    router = APIRouter(prefix="/api/v1")

    def actor(request: Request) -> Actor:
        found = auth(request)
        if found is None:
            raise Unauthorized("send a valid API token in the Authorization header")
        return found

    def admin(who: Annotated[Actor, Depends(actor)]) -> Admin:
        return app.admin(who)

    # -- jobs ------------------------------------------------------------------

    @router.post("/jobs", status_code=201, tags=["jobs"])
    def enqueue(body: EnqueueBody, response: Response, who: Annotated[Actor, Depends(actor)],
                idempotency_key: Annotated[str | None, Header(max_length=255)] = None) -> JSON:
        """Enqueue a job for the caller. With an ``Idempotency-Key`` header the
        same key (per owner) returns the existing job: 200, not 201."""
        if body.run_at is not None and body.delay_s is not None:
            raise _invalid("give run_at or delay_s, not both")
        done = app.client.enqueue(
            body.task, args=body.args, kwargs=body.kwargs, queue=body.queue, priority=body.priority,
            run_at=body.run_at, delay=None if body.delay_s is None else timedelta(seconds=body.delay_s),
            owner=who.owner, max_attempts=body.max_attempts, idempotency_key=idempotency_key,
            version=body.version, dedupe=body.dedupe,
        )
        if done.duplicate:
            response.status_code = 200
        return job_view(done.job)

    @router.get("/jobs", tags=["jobs"])
    def jobs(
        ops: Annotated[Admin, Depends(admin)],
        status: Annotated[list[Status] | None, Query()] = None,
        task: str | None = None, queue: str | None = None, error_code: str | None = None,
        owner: str | None = None, idempotency_key: str | None = None,
        created_after: datetime | None = None, created_before: datetime | None = None,
        cursor: str | None = None, limit: Annotated[int, Query(ge=1)] = 50,
    ) -> JSON:
        """Newest first, a page at a time (``cursor``: the last page's
        ``next_cursor``; ``limit`` is clamped). An owner sees their own jobs."""
        page = ops.jobs(status=status, task=task, queue=queue, error_code=error_code, owner=owner,
                        idempotency_key=idempotency_key, created_after=created_after,
                        created_before=created_before, after=cursor, limit=page_size(limit))
        return page_view(page, job_view)

    @router.get("/jobs/{job_id}", tags=["jobs"])
    def job(job_id: str, ops: Annotated[Admin, Depends(admin)]) -> JSON:
        """The job and its events, oldest first."""
        found = ops.job(job_id)
        return {**job_view(found), "events": [event_view(e) for e in ops.job_events(found.id)]}

    @router.post("/jobs/{job_id}/retry", tags=["jobs"])
    def retry(job_id: str, ops: Annotated[Admin, Depends(admin)], body: Strict | None = None) -> JSON:
        """A failed job runs again, at the stage that failed; 409 otherwise."""
        return job_view(ops.retry(job_id))

    @router.post("/jobs/{job_id}/cancel", tags=["jobs"])
    def cancel(job_id: str, ops: Annotated[Admin, Depends(admin)], body: Strict | None = None) -> JSON:
        """A scheduled or queued job ends cancelled now; a running one is
        stopped by its worker within a second or so (it is still running in
        this answer)."""
        return job_view(ops.cancel(job_id))

    return router


def health(app: App) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz", tags=["health"])
    def healthz() -> JSON:
        """The process answers."""
        return {"status": "ok"}

    @router.get("/readyz", tags=["health"], response_model=None)
    def readyz() -> JSON | JSONResponse:
        """The store answers and its schema is current."""
        try:
            if not app.store.schema_current():
                return error(503, "SCHEMA_OUTDATED", "migrations are pending: run `redrive migrate`")
        except RedriveError as exc:
            return error(503, exc.code, exc.message)
        return {"status": "ready"}

    return router


def _invalid(message: str) -> RedriveError:
    from redrive.errors import ConfigError

    return ConfigError(message)


__all__ = ["FastAPI", "Forbidden", "health", "routes"]
