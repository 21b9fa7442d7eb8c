"""A local email provider that behaves like the real ones (Postmark, SendGrid,
SES): ``POST /messages`` with an ``Idempotency-Key`` header delivers a message
once and answers the same id for a repeated key; ``GET /messages?idempotency_key=``
looks a delivery up (404 when there is none). Recipients at ``invalid.example``
are refused for good (422); ``fail_next(n)`` makes the next sends answer 503.
Every request is recorded."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from tests.fakes.server import local_server


class MailProvider:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.delivered: dict[str, dict] = {}  # idempotency key -> the message, delivered once
        self.posts: Counter[str] = Counter()  # send requests per idempotency key
        self.lookups: Counter[str] = Counter()
        self._failing = 0
        self.url = ""

    def fail_next(self, count: int) -> None:
        with self._lock:
            self._failing = count

    def send(self, key: str | None, message: dict) -> tuple[int, dict]:
        with self._lock:
            if not key:
                return 400, {"error": "Idempotency-Key header is required"}
            self.posts[key] += 1
            if self._failing:
                self._failing -= 1
                return 503, {"error": "temporarily unavailable"}
            if str(message.get("to", "")).endswith("@invalid.example"):
                return 422, {"error": "recipient rejected"}
            if key not in self.delivered:
                self.delivered[key] = {**message, "id": f"msg-{len(self.delivered) + 1}"}
            return 200, {"id": self.delivered[key]["id"]}

    def lookup(self, key: str) -> tuple[int, dict]:
        with self._lock:
            self.lookups[key] += 1
            if key in self.delivered:
                return 200, {"id": self.delivered[key]["id"]}
            return 404, {"error": "no such message"}


@contextmanager
def serving() -> Iterator[MailProvider]:
    provider = MailProvider()

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            message = json.loads(self.rfile.read(length) or b"{}")
            self._reply(*provider.send(self.headers.get("Idempotency-Key"), message))

        def do_GET(self) -> None:
            query = parse_qs(urlsplit(self.path).query)
            self._reply(*provider.lookup((query.get("idempotency_key") or [""])[0]))

        def log_message(self, *args) -> None:
            pass

    with local_server(Handler) as url:
        provider.url = url
        yield provider
