"""A stand-in for the email provider, on 127.0.0.1, with the API shape of
the real ones: ``POST /v1/messages`` with an ``Idempotency-Key`` header
answers ``202 {"id"}``, and the same key again answers the same id without
sending twice; ``GET /v1/messages?idempotency_key=K`` finds a message
(``404`` if it was never taken).

It fails the way real providers do when told to (``POST /admin/mode``):
``{"mode": "down"}`` answers 503 to every send, ``{"mode": "hold",
"hold_s": s}`` takes the next send and then answers only ``s`` seconds later
(a worker killed in that window has sent without recording it). Addresses
on ``invalid.example`` are refused ``422 invalid_recipient``; those given
to ``POST /admin/block`` are refused ``403 policy_rejected``.
``GET /admin/sends`` lists every send call, ``GET /admin/messages`` the
messages taken.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


class Provider:
    def __init__(self, api_key: str = "") -> None:
        self.api_key = api_key
        self.lock = threading.Lock()
        self.mode, self.hold_s = "ok", 0.0
        self.blocked: set[str] = set()
        self.sends: list[dict[str, Any]] = []
        self.messages: dict[str, dict[str, Any]] = {}  # idempotency key -> message

    def send(self, key: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], float]:
        """(status, answer, seconds to wait before answering)"""
        with self.lock:
            self.sends.append({"key": key, "to": body.get("to"), "subject": body.get("subject"), "at": time.time()})
            if self.mode == "down":
                return 503, {"error": "unavailable", "message": "Service temporarily unavailable"}, 0
            recipient = str(body.get("to", ""))
            if recipient.endswith("@invalid.example") or "@" not in recipient:
                return 422, {"error": "invalid_recipient", "message": "The recipient address is not valid"}, 0
            if recipient in self.blocked:
                return 403, {"error": "policy_rejected", "message": "Sending to this recipient is not allowed"}, 0
            if key in self.messages:
                return 200, {"id": self.messages[key]["id"]}, 0
            message = {"id": f"msg_{len(self.messages) + 1:06d}", "key": key, "to": recipient,
                       "subject": body.get("subject"), "text": body.get("text"), "at": time.time()}
            self.messages[key] = message
            wait = 0.0
            if self.mode == "hold":
                wait, self.mode = self.hold_s, "ok"  # once: the next sends are answered at once
            return 202, {"id": message["id"]}, wait

    def lookup(self, key: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            found = self.messages.get(key)
        return (200, {"id": found["id"], "status": "delivered"}) if found else (404, {"error": "not_found"})


def serve(provider: Provider, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real providers offer

        def _reply(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the caller is gone (killed while we held its answer)

        def _authorized(self) -> bool:
            if provider.api_key and self.headers.get("Authorization") != f"Bearer {provider.api_key}":
                self._reply(401, {"error": "unauthorized", "message": "Invalid API key"})
                return False
            return True

        def do_GET(self) -> None:
            url = urlparse(self.path)
            if url.path == "/admin/sends":
                with provider.lock:
                    self._reply(200, list(provider.sends))
            elif url.path == "/admin/messages":
                with provider.lock:
                    self._reply(200, list(provider.messages.values()))
            elif url.path == "/health":
                self._reply(200, {"ok": True})
            elif url.path == "/v1/messages" and self._authorized():
                self._reply(*provider.lookup(parse_qs(url.query).get("idempotency_key", [""])[0]))
            elif url.path != "/v1/messages":
                self._reply(404, {"error": "not_found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            if len(raw) < length:  # the caller went away mid-request (killed): nothing was sent
                self.close_connection = True
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._reply(400, {"error": "invalid_json", "message": "The body is not JSON"})
                return
            if self.path == "/admin/mode":
                with provider.lock:
                    provider.mode, provider.hold_s = str(body["mode"]), float(body.get("hold_s", 0))
                self._reply(200, {"ok": True})
            elif self.path == "/admin/block":
                with provider.lock:
                    provider.blocked.add(str(body["recipient"]))
                self._reply(200, {"ok": True})
            elif self.path == "/admin/unblock":
                with provider.lock:
                    provider.blocked.discard(str(body["recipient"]))
                self._reply(200, {"ok": True})
            elif self.path == "/v1/messages" and self._authorized():
                status, answer, wait = provider.send(self.headers.get("Idempotency-Key", ""), body)
                time.sleep(wait)
                self._reply(status, answer)
            elif self.path != "/v1/messages":
                self._reply(404, {"error": "not_found"})

        def log_message(self, *args: object) -> None:
            pass

    return _Server(("127.0.0.1", port), Handler)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # many workers sending at once


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m review_notify provider")
    parser.add_argument("--port", type=int, default=8097)
    parser.add_argument("--api-key", default="")
    args = parser.parse_args(argv)
    server = serve(Provider(args.api_key), args.port)
    print(f"email provider stand-in on http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()
