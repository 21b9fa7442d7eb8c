"""A local stand-in for Sentry's ingestion endpoint: takes the envelopes
the SDK posts (``/api/<project>/envelope/``, gzip or not), keeps each
event, and answers as Sentry does (200 with the event's id; 429 with
``Retry-After`` when told to refuse, which the SDK must respect)."""

from __future__ import annotations

import gzip
import json
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.server import local_server


class SentryIngest:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.raw: list[bytes] = []  # every body as received, decompressed: to look for leaks
        self.dsn = ""
        self._lock = threading.Lock()

    def take(self, path: str, body: bytes, encoding: str | None) -> tuple[int, str]:
        if not path.startswith("/api/1/envelope/"):
            return 404, "{}"
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        elif encoding not in (None, "", "identity"):
            return 415, "{}"
        lines = body.split(b"\n")
        header = json.loads(lines[0])
        with self._lock:
            self.raw.append(body)
            # item header, item payload, ... after the envelope's own header
            for item_header, payload in zip(lines[1::2], lines[2::2], strict=False):
                if item_header.strip() and json.loads(item_header).get("type") == "event":
                    self.events.append(json.loads(payload))
        return 200, json.dumps({"id": header.get("event_id")})


@contextmanager
def sentry_ingest() -> Iterator[SentryIngest]:
    ingest = SentryIngest()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, text = ingest.take(self.path, body, self.headers.get("Content-Encoding"))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(text.encode())

        def log_message(self, *args: object) -> None:
            pass

    with local_server(Handler) as url:
        ingest.dsn = url.replace("http://", "http://publickey@", 1) + "/1"
        yield ingest
