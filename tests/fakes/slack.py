"""A local Slack incoming webhook that behaves like the real one: ``POST``
a JSON body with ``text`` (or ``blocks``) and it answers ``200 ok``; a body
that is not JSON or has neither gets ``400 invalid_payload``; an unknown
path gets ``404 no_service``. ``fail_next(n, status)`` makes the next posts
answer that status (500, or 429 with ``Retry-After``); ``hang_next(n, s)``
makes them wait ``s`` seconds before answering, having posted nothing (a
service stuck before it did anything); ``hold_next(s)`` records the
next message and then waits ``s`` seconds before answering (a send that
arrived but was never confirmed). Every message that was posted validly is
recorded, whatever the answer."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

from tests.fakes.server import local_server

PATH = "/services/T0FAKE/B0FAKE/abcdefghijklmnopqrstuvwx"


class SlackWebhook:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.messages: list[str] = []  # the text of each valid post, in order
        self.posts = 0
        self._script: list[tuple[str, float]] = []  # ("fail", status) / ("hang", s) / ("hold", s)
        self.url = ""

    def fail_next(self, count: int, status: int = 500) -> None:
        with self._lock:
            self._script += [("fail", status)] * count

    def hang_next(self, count: int, seconds: float) -> None:
        with self._lock:
            self._script += [("hang", seconds)] * count

    def hold_next(self, seconds: float) -> None:
        with self._lock:
            self._script.append(("hold", seconds))

    def post(self, path: str, body: bytes) -> tuple[int, str, float]:
        """(status, text, seconds to wait before answering)."""
        if path != PATH:
            return 404, "no_service", 0
        try:
            payload = json.loads(body)
        except ValueError:
            return 400, "invalid_payload", 0
        if not isinstance(payload, dict) or not (payload.get("text") or payload.get("blocks")):
            return 400, "invalid_payload", 0
        with self._lock:
            self.posts += 1
            step = self._script.pop(0) if self._script else ("ok", 0)
            if step[0] == "fail":
                return int(step[1]), "internal_error" if step[1] >= 500 else "rate_limited", 0
            if step[0] == "hang":  # stuck before it posted anything
                return 200, "ok", step[1]
            self.messages.append(payload.get("text", ""))
        return 200, "ok", step[1] if step[0] == "hold" else 0


@contextmanager
def slack_webhook() -> Iterator[SlackWebhook]:
    hook = SlackWebhook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status, text, wait = hook.post(self.path, body)
            time.sleep(wait)
            try:
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", "1")
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(text.encode())
            except OSError:
                pass  # the client gave up waiting

        def log_message(self, *args: object) -> None:
            pass

    with local_server(Handler) as url:
        hook.url = url + PATH
        yield hook
