"""Every error a client sees: ``{"error": {"code", "message"}}`` with the
status its code calls for, a one-line message, and nothing of the server's
insides (no stack, SQL or path)."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from redrive.core.classify import one_line
from redrive.errors import (
    ConfigError,
    DeadLetterNotFound,
    Forbidden,
    IdempotencyKeyReused,
    JobNotFound,
    JobStateError,
    RedriveError,
    StoreError,
    StoreFull,
    UnknownDependency,
    UnknownTask,
    WorkflowNotFound,
)

log = logging.getLogger("redrive.http")


class Unauthorized(RedriveError):
    """No token, or not one of ours."""

    code = "UNAUTHORIZED"


class BatchTooLarge(RedriveError):
    code = "BATCH_TOO_LARGE"


# The most specific class first.
_STATUS: tuple[tuple[type[RedriveError], int], ...] = (
    (Unauthorized, 401),
    (BatchTooLarge, 400),
    (JobNotFound, 404),
    (DeadLetterNotFound, 404),
    (WorkflowNotFound, 404),
    (Forbidden, 403),
    (IdempotencyKeyReused, 422),
    (UnknownDependency, 404),
    (UnknownTask, 422),
    (ConfigError, 422),
    (JobStateError, 409),
    (StoreFull, 503),
    (StoreError, 503),
)

_HTTP_CODES = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND",
               405: "METHOD_NOT_ALLOWED", 409: "CONFLICT", 413: "BODY_TOO_LARGE",
               415: "UNSUPPORTED_MEDIA_TYPE", 422: "VALIDATION_FAILED", 429: "RATE_LIMITED"}


# What FastAPI raises when parsing a body fails other than by a JSON syntax error.
_FASTAPI_PARSE_FAILURE = "There was an error parsing the body"


def error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": one_line(message)}}, status_code=status,
                        headers=headers)


def status_of(exc: RedriveError) -> int:
    return next((status for kind, status in _STATUS if isinstance(exc, kind)), 500)


def install(api: FastAPI) -> None:
    @api.exception_handler(RedriveError)
    async def redrive_error(_: Request, exc: RedriveError) -> JSONResponse:
        status = status_of(exc)
        if status == 500:
            log.error("request failed with %s: %s", exc.code, one_line(exc.message))
        return error(status, exc.code, exc.message)

    @api.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        message = first.get("msg", "invalid request")
        if first.get("type") == "extra_forbidden":
            message = "a client may not set this field"
        return error(422, "VALIDATION_FAILED", f"{where}: {message}" if where else message)

    @api.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.detail == _FASTAPI_PARSE_FAILURE:
            # JSON that Python's parser gives up on (in practice: nested
            # past its recursion limit) is a bad body like any other, not a
            # vague 400.
            return error(422, "VALIDATION_FAILED", "the body is not JSON this server reads (nested too deeply?)")
        code = _HTTP_CODES.get(exc.status_code, "HTTP_ERROR")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ").lower()
        return error(exc.status_code, code, message, headers=getattr(exc, "headers", None))

    @api.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        # Logged for us, with its stack; the client learns only that it failed.
        log.exception("request failed unexpectedly")
        return error(500, "INTERNAL", "the server failed to answer; it has been logged")
