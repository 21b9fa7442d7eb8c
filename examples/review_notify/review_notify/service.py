"""The review service's API (§6.1, §6.2, §10): callers ask for a review's
notifications with their own idempotency key.

- ``POST /reviews`` ``{"idempotency_key", "changelist_id", "review_version",
  "recipients"}``: 201 with the new job; 200 with the existing one
  (``"duplicate": true``) for a key already taken at that version (or a
  higher one), its result included once it succeeded; a strictly higher
  ``review_version`` under the same key is a versioned rerun: a new job,
  201. The same key and version with other content is 409
  ``IDEMPOTENCY_KEY_REUSED``.
- ``GET /reviews/{job_id}``: the job's state and result.

Errors are ``{"error": {"code", "message"}}`` with one line, never a stack.
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, StringConstraints

from redrive import Actor, App, IdempotencyKeyReused, Job, JobNotFound, RedriveError
from review_notify.tasks import TASK

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]


class ReviewRequest(BaseModel):
    idempotency_key: Text
    changelist_id: Text
    review_version: int = Field(ge=1)
    recipients: list[Text] = Field(min_length=1, max_length=100)


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _view(job: Job, *, duplicate: bool = False) -> dict[str, Any]:
    return {"job_id": str(job.id), "status": job.status.value, "review_version": job.version,
            "duplicate": duplicate, "result": job.result, "error_code": job.error_code}


def create_app(app: App) -> FastAPI:
    api = FastAPI(title="review notifications", docs_url=None, redoc_url=None)
    admin = app.admin(Actor.operator("review-service"))

    @api.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())[1:] if not isinstance(part, int)) or "body"
        return _error(422, "INVALID_REQUEST", f"{where}: {first.get('msg', 'invalid')}")

    @api.exception_handler(RedriveError)
    async def unavailable(request: Request, exc: RedriveError) -> JSONResponse:
        return _error(503, exc.code, "the job store is unavailable; try again")

    @api.post("/reviews")
    def request_review(review: ReviewRequest) -> JSONResponse:
        try:
            made = app.enqueue(TASK, kwargs={"changelist_id": review.changelist_id,
                                             "review_version": review.review_version,
                                             "recipients": review.recipients},
                               idempotency_key=review.idempotency_key, version=review.review_version)
        except IdempotencyKeyReused:
            return _error(409, "IDEMPOTENCY_KEY_REUSED",
                          "this idempotency key and review_version were used for another request")
        return JSONResponse(_view(made.job, duplicate=made.duplicate), status_code=200 if made.duplicate else 201)

    @api.get("/reviews/{job_id}")
    def review(job_id: UUID) -> JSONResponse:
        try:
            return JSONResponse(_view(admin.job(job_id)))
        except JobNotFound:
            return _error(404, "NOT_FOUND", f"no review job {job_id}")

    return api
