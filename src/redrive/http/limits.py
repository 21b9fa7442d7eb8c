"""Request bodies: refused with 413 once they pass the limit, before they are
read in full (a declared Content-Length over it is refused unread), and with
415 unless they are urlencoded forms (the dashboard). The API's routes check
for JSON themselves, after the caller (``api.CallerFirst``)."""

from __future__ import annotations

import json
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DEFAULT_MAX_BODY = 1_048_576 + 65_536  # a job's largest payload, and room for the rest of the request


class _TooLarge(HTTPException):
    """Raised from ``receive``: FastAPI passes an HTTPException through its
    body parsing (anything else there becomes a 400)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over {limit} bytes")


class BodyLimit:
    def __init__(self, app: ASGIApp, *, max_body: int = DEFAULT_MAX_BODY) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            await _refuse(send, 413, "BODY_TOO_LARGE", f"the request body is over {self.max_body} bytes")
            return
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        wanted = "application/x-www-form-urlencoded"  # the dashboard's forms
        if (not scope["path"].startswith("/api/") and (declared not in ("", "0") or "transfer-encoding" in headers)
                and kind != wanted):
            await _refuse(send, 415, "UNSUPPORTED_MEDIA_TYPE", f"send the request body as {wanted}")
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise _TooLarge(self.max_body)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge:
            if not started:
                await _refuse(send, 413, "BODY_TOO_LARGE", f"the request body is over {self.max_body} bytes")


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers: list[Any] = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                          (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
