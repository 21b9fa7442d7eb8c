"""A scripted local HTTP service standing in for a flaky upstream (an LLM API,
a gateway): each path (query string aside) answers the statuses scripted for it, one per request,
then its standing answer (200 unless set). Every call is recorded with its time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from tests.fakes.server import local_server


class Upstream:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scripts: dict[str, list[tuple[int, dict[str, str]]]] = {}
        self._standing: dict[str, int] = {}
        self._calls: list[tuple[str, float]] = []
        self.url = ""

    def script(self, path: str, *answers: int | tuple[int, dict[str, str]]) -> None:
        """The next answers for ``path``: statuses, or (status, headers)."""
        with self._lock:
            self._scripts[path] = [a if isinstance(a, tuple) else (a, {}) for a in answers]

    def standing(self, path: str, status: int) -> None:
        """What ``path`` answers once its script is used up; a path ending in
        "/" sets it for every path under it."""
        with self._lock:
            self._standing[path] = status

    def calls(self, path: str | None = None, *, since: float = 0.0) -> list[float]:
        """Monotonic times of the calls to ``path`` (or under it, when it ends
        in "/"; to any path when None), from ``since`` on."""
        with self._lock:
            return [at for p, at in self._calls if at >= since and (
                path is None or p == path or (path.endswith("/") and p.startswith(path)))]

    def _answer(self, path: str) -> tuple[int, dict[str, str]]:
        with self._lock:
            self._calls.append((path, time.monotonic()))
            script = self._scripts.get(path)
            if script:
                return script.pop(0)
            if path in self._standing:
                return self._standing[path], {}
            under = [p for p in self._standing if p.endswith("/") and path.startswith(p)]
            return (self._standing[max(under, key=len)] if under else 200), {}


@contextmanager
def serving() -> Iterator[Upstream]:
    upstream = Upstream()

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            status, headers = upstream._answer(urlsplit(self.path).path)
            body = b'{"ok": true}' if status < 400 else b'{"error": "scripted failure"}'
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _reply

        def log_message(self, *args) -> None:
            pass

    with local_server(Handler) as url:
        upstream.url = url
        yield upstream
