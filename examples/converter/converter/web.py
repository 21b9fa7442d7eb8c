"""The converter's service: upload a PDF with a mapping, follow the job,
download the XML, retry a failure; and the queue page. Who owns a job is a
session cookie, as in the original design; a job's owner is a hash of it,
so the session itself is never stored or shown.

Errors are ``{"error": {"code", "message"}}`` with the shared codes and
their one-line messages (codes.py); no stack trace or path ever leaves.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader
from python_multipart.exceptions import MultipartParseError

from converter import storage
from converter.codes import message, public
from converter.settings import Settings
from converter.tasks import make_app
from converter.uploads import Refused, receive
from redrive import Actor, App, BreakerMode, IllegalTransition, Job, RedriveError, Status

COOKIE = "converter_session"
BUSY = "Converter busy — jobs will resume automatically"
STATUS = {Status.SCHEDULED: "queued", Status.QUEUED: "queued", Status.RUNNING: "processing",
          Status.SUCCEEDED: "complete", Status.FAILED: "failed", Status.CANCELLED: "failed"}
log = logging.getLogger("converter")
_PAGES = Environment(loader=PackageLoader("converter", "templates"), autoescape=True)


def error(code: str, status: int, text: str | None = None, **extra: Any) -> JSONResponse:
    """An error answer: one of the shared codes and its one-line message (or ``text``)."""
    return JSONResponse({"error": {"code": code, "message": text or message(code)}, **extra}, status_code=status)


def create_app(settings: Settings, app: App | None = None) -> FastAPI:
    app = app or make_app(settings)
    web = FastAPI(title="converter", docs_url=None, redoc_url=None)
    limit = settings.max_upload_mb * 1024 * 1024

    def owner_of(request: Request) -> str | None:
        session = request.cookies.get(COOKIE)
        return "s-" + hashlib.sha256(session.encode()).hexdigest()[:24] if session else None

    @web.middleware("http")
    async def session(request: Request, call_next: Any) -> Response:
        fresh = None
        if not request.cookies.get(COOKIE):
            fresh = settings.demo_session or secrets.token_urlsafe(24)
            request.scope["headers"] = [*request.scope["headers"], (b"cookie", f"{COOKIE}={fresh}".encode())]
        response = await call_next(request)
        if fresh is not None:
            response.set_cookie(COOKIE, fresh, httponly=True, samesite="lax", max_age=30 * 86400)
        return response

    def view(job: Any) -> dict[str, Any]:
        refused = job.task == "refused"  # failed at the door: so from the start, whether or not a worker ran it
        status = Status.FAILED if refused else job.status
        code = public(job.kwargs["code"] if refused else
                      job.error_code or (job.last_error_code if job.status is not Status.SUCCEEDED else None))
        source = job.kwargs.get("source") or ""
        return {
            "id": str(job.id), "status": STATUS[status], "filename": job.kwargs.get("filename", ""),
            "mapping": job.kwargs.get("mapping"), "attempts": job.attempts,
            "error_code": code if status is Status.FAILED else None,
            "error_message": message(code) if status is Status.FAILED else None,
            "retrying": code if status in (Status.QUEUED, Status.SCHEDULED) and job.attempts else None,
            "created_at": job.created_at.isoformat(),
            "finished_at": job.finished_at.isoformat() if job.finished_at else None,
            "source_exists": bool(source) and _exists(settings, source),
        }

    def mine(request: Request, job_id: str) -> Any:
        """The caller's job, or the response that says why not."""
        try:
            found = app.admin(Actor.operator("converter")).job(job_id)
        except RedriveError as exc:  # no such job, or not a job id at all: as a job retention removed
            log.info("job %r asked for: %s", job_id[:64], exc.code)
            return error("EXPIRED", 404, "No such job: it never existed, or retention removed it.")
        if found.owner != owner_of(request):
            return error("FORBIDDEN", 403)
        return found

    @web.post("/api/upload")
    async def upload(request: Request) -> Response:
        owner = owner_of(request)
        try:
            got = await receive(request.headers.get("content-type", ""), request.stream(), settings.uploads_dir, limit)
        except Refused as refused:
            if refused.code == "NOT_PDF":  # the job is recorded failed, as the user's queue shows it
                job = app.enqueue("refused", kwargs={"filename": refused.filename, "code": "NOT_PDF"},
                                  owner=owner).job
                return error("NOT_PDF", 400, job={"id": str(job.id)})
            return error(refused.code, refused.status)
        except MultipartParseError:
            return error("UNKNOWN", 400, "The upload could not be read.")
        except OSError:
            return error("IO_ERROR", 500)
        mapping = got.fields.get("mapping", "generic").strip() or "generic"
        name = f"{got.sha256}.pdf"
        try:
            os.replace(got.path, storage.source_path(settings, name))  # type: ignore[arg-type]
        except OSError:
            got.path.unlink(missing_ok=True)  # type: ignore[union-attr]
            return error("IO_ERROR", 500)
        work = {"source": name, "mapping": mapping, "filename": got.filename}
        twin = (owner, got.sha256, mapping, got.size)
        done = app.enqueue("convert", kwargs=work, owner=owner, dedupe=twin)
        while done.duplicate and done.job.status is Status.SUCCEEDED and not _converted(settings, done.job):
            # Its XML went with retention: re-uploading regenerates it, as a run
            # keyed after the one whose file expired (a later re-upload finds it).
            done = app.enqueue("convert", kwargs=work, owner=owner, dedupe=(*twin, f"after:{done.job.id}"))
        return JSONResponse({"job": view(done.job), "duplicate": done.duplicate},
                            status_code=200 if done.duplicate else 201)

    @web.get("/api/jobs")
    def jobs(request: Request) -> dict[str, Any]:
        owner = owner_of(request)
        found: list[Job] = list(app.admin(Actor.acting_for(owner)).jobs(limit=100)) if owner else []
        return {"items": [view(j) for j in found]}

    @web.get("/api/jobs/{job_id}")
    def job(request: Request, job_id: str) -> Response:
        found = mine(request, job_id)
        return found if isinstance(found, Response) else JSONResponse(view(found))

    @web.get("/api/jobs/{job_id}/download")
    def download(request: Request, job_id: str) -> Response:
        found = mine(request, job_id)
        if isinstance(found, Response):
            return found
        if found.status is not Status.SUCCEEDED:
            return error("NOT_READY", 409)
        path = storage.result_path(settings, found.kwargs["source"], found.kwargs["mapping"])
        if not path.is_file():
            return error("EXPIRED", 404)
        stem = Path(found.kwargs.get("filename") or "document").stem
        return FileResponse(path, media_type="application/xml", filename=f"{stem}.xml")

    @web.post("/api/jobs/{job_id}/retry")
    def retry(request: Request, job_id: str) -> Response:
        found = mine(request, job_id)
        if isinstance(found, Response):
            return found
        if found.task == "refused":  # not a PDF: another try would be refused the same way
            return error(found.kwargs["code"], 409)
        if found.status is not Status.FAILED:
            return not_retryable(found)
        if not found.kwargs.get("source") or not _exists(settings, found.kwargs["source"]):
            return error("EXPIRED", 410)
        try:
            again = app.admin(Actor.acting_for(found.owner)).retry(found.id)
        except IllegalTransition:  # retried meanwhile
            return not_retryable(app.admin(Actor.acting_for(found.owner)).job(found.id))
        return JSONResponse(view(again))

    def not_retryable(found: Job) -> JSONResponse:
        """A retry of a job that has not failed: still under way (NOT_READY),
        or ended otherwise (UNKNOWN, the shared set's catch-all), the precise
        reason in the message and the log."""
        log.info("retry of job %s refused: it is %s", found.id, found.status)
        if found.status in (Status.SCHEDULED, Status.QUEUED, Status.RUNNING):
            return error("NOT_READY", 409, "Conversion not finished yet: only a failed job can be retried.")
        if found.status is Status.SUCCEEDED:
            return error("UNKNOWN", 409, "This conversion is complete: only a failed job can be retried.")
        return error("UNKNOWN", 409, "This conversion was cancelled: upload the file again to convert it.")

    @web.get("/api/status")
    def service_status() -> dict[str, Any]:
        """What the queue page's banner says, for API clients: whether the
        gateway's breaker holds new jobs (they resume by themselves)."""
        busy = _gateway_busy(app)
        return {"gateway_busy": busy, "message": BUSY if busy else None}

    @web.get("/", response_class=HTMLResponse)
    def queue_page(request: Request) -> HTMLResponse:
        owner = owner_of(request)
        found: list[Job] = list(app.admin(Actor.acting_for(owner)).jobs(limit=100)) if owner else []
        html = _PAGES.get_template("queue.html").render(jobs=[view(j) for j in found], busy=BUSY if _gateway_busy(app) else None)
        return HTMLResponse(html, headers={"Content-Security-Policy": "default-src 'self'; style-src 'unsafe-inline'; "
                                                                      "frame-ancestors 'none'",
                                           "Cache-Control": "no-store"})

    @web.post("/jobs/{job_id}/retry")
    def retry_from_page(request: Request, job_id: str) -> Response:
        retry(request, job_id)
        return RedirectResponse("/", status_code=303)

    web.state.redrive = app
    return web


def _converted(settings: Settings, job: Job) -> bool:
    """Whether a succeeded job's XML is still there (retention removes it)."""
    try:
        return storage.result_path(settings, job.kwargs["source"], job.kwargs["mapping"]).is_file()
    except (KeyError, ValueError):
        return False


def _exists(settings: Settings, source: str) -> bool:
    try:
        return storage.source_path(settings, source).is_file()
    except ValueError:
        return False


def _gateway_busy(app: App) -> bool:
    """While the gateway's breaker holds jobs (open, in hold mode), the queue page says so."""
    if app.registry.dependencies["gateway"].mode is not BreakerMode.HOLD:
        return False  # fail-fast: the jobs fail at once, with their own message
    try:
        status = app.admin(Actor.operator("converter")).breakers().get("gateway")
    except RedriveError:
        return False
    return status is not None and status.state == "open"
