"""Stand-ins for the three services the criticizer calls, on 127.0.0.1, in
one process: the source of changes (``GET /changes/{id}``), the LLM
(``POST /v1/chat/completions``, OpenAI-style) and the chat webhook the
critique is posted to (``POST /hooks/{channel}``, which keeps one message
per ``Idempotency-Key``, as real providers do).

Each fails the way the real one does when told to: ``POST /admin/script``
with ``{"service": "source"|"llm"|"webhook", "key": change id, "answers":
[...], "always": answer, "retry_after": s, "hang_s": s}``. Answers: ``ok``,
``timeout``, ``reset`` (the connection dropped), an HTTP status (``429``,
``500``, ``502``, ``503``, ``504``, ``409``, ``400``, ``401``, ``403``,
``404``, ``410``), and per service: ``rate_limit_exceeded``, ``quota``,
``internal_error``, ``policy``, ``token_expired``, ``garbage``,
``schema``, ``echo`` (a 400 that quotes the prompt back, as some
providers' validation errors do) for the LLM; ``missing_fields`` and
``malformed`` for the source; ``channel_deleted`` and ``policy_denied``
for the webhook. ``POST /admin/change`` with ``{"id", "title", "diff"}``
sets what the source serves for a change. ``GET /admin/calls`` lists the calls; ``GET
/admin/messages`` the messages the webhook took.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

_STATUS_ERRORS = {
    "400": (400, "invalid_request_error", "The request is invalid."),
    "401": (401, "invalid_api_key", "Incorrect API key provided."),
    "403": (403, "permission_denied", "You do not have access to this resource."),
    "404": (404, "not_found", "No such resource."),
    "409": (409, "version_conflict", "The resource was changed concurrently."),
    "410": (410, "gone", "The resource was removed."),
    "429": (429, "rate_limit_exceeded", "Rate limit reached. Please try again later."),
    "500": (500, "server_error", "The server had an error."),
    "502": (502, "bad_gateway", "Bad gateway."),
    "503": (503, "unavailable", "Service unavailable."),
    "504": (504, "gateway_timeout", "Gateway timeout."),
    "rate_limit_exceeded": (429, "rate_limit_exceeded", "Rate limit reached for requests."),
    "quota": (429, "quota_window_exceeded", "You exceeded your current quota window; it resets shortly."),
    "internal_error": (500, "internal_error", "The model had an internal error."),
    "policy": (400, "content_policy_violation", "Your request was rejected by the moderation system."),
    "token_expired": (401, "token_expired", "The access token expired."),
    "channel_deleted": (410, "channel_not_found", "The channel was deleted."),
    "policy_denied": (403, "policy_denied", "Posting to this channel is denied by policy."),
}


class Services:
    def __init__(self, tokens: dict[str, str] | None = None) -> None:
        self.tokens = tokens or {}  # service -> the bearer token its callers must send (none: anything)
        self.lock = threading.Lock()
        self.scripts: dict[tuple[str, str], list[str]] = {}
        self.always: dict[tuple[str, str], str] = {}
        self.retry_after, self.hang_s = 1, 3.0
        self.calls: list[dict[str, Any]] = []
        self.messages: dict[str, dict[str, Any]] = {}  # Idempotency-Key -> the message the webhook took
        self.changes: dict[str, dict[str, str]] = {}  # change id -> its title and diff, when set

    def script(self, body: dict[str, Any]) -> None:
        with self.lock:
            key = (str(body["service"]), str(body["key"]))
            self.scripts[key] = [str(a) for a in body.get("answers", [])]
            if "always" in body:
                self.always[key] = str(body["always"])
            else:
                self.always.pop(key, None)
            self.retry_after = int(body.get("retry_after", self.retry_after))
            self.hang_s = float(body.get("hang_s", self.hang_s))

    def answer(self, service: str, key: str) -> str:
        with self.lock:
            queue = self.scripts.get((service, key))
            answer = queue.pop(0) if queue else self.always.get((service, key), "ok")
            self.calls.append({"service": service, "key": key, "answer": answer, "at": time.time()})
            return answer


def _completion(content: str) -> dict[str, Any]:
    return {"id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}


def serve(services: Services, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Request-Id", f"req-{time.time_ns()}")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self, service: str) -> bool:
            token = services.tokens.get(service)
            if token and self.headers.get("Authorization") != f"Bearer {token}":
                self._reply(401, {"error": {"code": "invalid_api_key", "message": "Incorrect API key provided."}})
                return False
            return True

        def _scripted(self, service: str, key: str, prompt: str = "") -> str | None:
            """Answer a failure if one is due; else the answer to handle (ok, garbage, ...)."""
            answer = services.answer(service, key)
            if answer in ("timeout", "reset"):
                if answer == "timeout":
                    time.sleep(services.hang_s)
                else:
                    self.close_connection = True
                    self.connection.close()  # no answer at all: the client sees the connection dropped
                    return None
                return "ok"
            if answer == "echo":
                self._reply(400, {"error": {"code": "invalid_request_error",
                                            "message": f"Invalid 'messages[1].content': {prompt[:200]!r}"}})
                return None
            if answer in _STATUS_ERRORS:
                status, code, message = _STATUS_ERRORS[answer]
                headers = {"Retry-After": str(services.retry_after)} if status == 429 else None
                self._reply(status, {"error": {"code": code, "type": code, "message": message}}, headers)
                return None
            return answer

        def do_GET(self) -> None:
            path = urlparse(self.path).path
            if path == "/admin/calls":
                with services.lock:
                    self._reply(200, list(services.calls))
            elif path == "/admin/messages":
                with services.lock:
                    self._reply(200, list(services.messages.values()))
            elif path == "/health":
                self._reply(200, {"ok": True})
            elif path.startswith("/changes/"):
                if not self._authorized("source"):
                    return
                change = path.removeprefix("/changes/")
                answer = self._scripted("source", change)
                if answer == "missing_fields":
                    self._reply(200, {"id": change, "title": "A change"})
                elif answer == "malformed":
                    self._reply(200, b'{"id": "' + change.encode() + b'", "title": ')
                elif answer is not None:
                    with services.lock:
                        content = services.changes.get(change) or {
                            "title": f"Change {change}", "diff": f"--- a/app.py\n+++ b/app.py\n+print('{change}')\n"}
                    self._reply(200, {"id": change, **content})
            else:
                self._reply(404, {"error": {"code": "not_found", "message": "No such resource."}})

        def do_POST(self) -> None:
            path = urlparse(self.path).path
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if path == "/admin/script":
                services.script(body)
                self._reply(200, {"ok": True})
            elif path == "/admin/change":
                with services.lock:
                    services.changes[str(body["id"])] = {"title": str(body["title"]), "diff": str(body["diff"])}
                self._reply(200, {"ok": True})
            elif path == "/v1/chat/completions":
                if not self._authorized("llm"):
                    return
                asked = json.loads(body["messages"][-1]["content"])
                answer = self._scripted("llm", asked["change_id"], body["messages"][-1]["content"])
                if answer == "garbage":
                    self._reply(200, _completion("Looks good to me!"))
                elif answer == "schema":
                    self._reply(200, _completion(json.dumps({"verdict": 3})))
                elif answer is not None:
                    verdict = f"{asked['title']}: {len(asked['diff'].splitlines())} lines, reads well"
                    self._reply(200, _completion(json.dumps({"verdict": verdict, "comments": []})))
            elif path.startswith("/hooks/"):
                if not self._authorized("webhook"):
                    return
                key = self.headers.get("Idempotency-Key", "")
                if self._scripted("webhook", str(body.get("change_id"))) is None:
                    return
                with services.lock:
                    taken = services.messages.setdefault(key or f"anon-{time.time_ns()}", {
                        "id": f"msg-{len(services.messages) + 1}", "channel": path.removeprefix("/hooks/"),
                        "change_id": body.get("change_id"), "text": body.get("text"), "key": key})
                self._reply(200, {"ok": True, "id": taken["id"]})
            else:
                self._reply(404, {"error": {"code": "not_found", "message": "No such resource."}})

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m criticizer services")
    parser.add_argument("--port", type=int, default=8095)
    for service in ("source", "llm", "webhook"):
        parser.add_argument(f"--{service}-token", default="", help=f"the bearer token {service} callers must send")
    args = parser.parse_args(argv)
    tokens = {s: getattr(args, f"{s}_token") for s in ("source", "llm", "webhook") if getattr(args, f"{s}_token")}
    server = serve(Services(tokens), args.port)
    print(f"source, LLM and webhook stand-ins on http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()
