"""A stand-in for the LLM provider, on 127.0.0.1: an OpenAI-style
``POST /v1/chat/completions`` that answers the match decision, and fails
the way the real one does when told to.

The decision itself is simple and deterministic (a candidate sharing a
reference with the document is a match); what matters here is the failures.
``POST /admin/script`` with ``{"document": id, "answers": [...]}`` makes
that document's next calls answer, in order:

- ``429`` (with ``Retry-After: 1``), ``500``, ``503``: the provider's error bodies;
- ``timeout``: nothing for ``hang_s`` seconds (the client gives up first);
- ``garbage``: 200 with text that is not JSON; ``schema``: 200 with JSON of the wrong shape;
- ``context``: 400 ``context_length_exceeded``; ``401``: a bad key; ``403``: permission denied;
- ``slow``: the right answer, after ``hang_s`` seconds;
- ``ok``: the right answer.

``"always": answer`` answers that way until told otherwise. ``GET
/admin/calls`` lists every call (document, answer given, time).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ERRORS = {
    "429": (429, "rate_limit_exceeded", "Rate limit reached for requests. Please try again in 1s."),
    "500": (500, "internal_error", "The server had an error while processing your request."),
    "503": (503, "overloaded", "The engine is currently overloaded, please try again later."),
    "context": (400, "context_length_exceeded",
                "This model's maximum context length is 8192 tokens. However, your messages resulted in 9121 tokens."),
    "401": (401, "invalid_api_key", "Incorrect API key provided."),
    "403": (403, "permission_denied", "You are not allowed to use this model."),
}


class Provider:
    def __init__(self, api_key: str = "") -> None:
        self.api_key = api_key
        self.lock = threading.Lock()
        self.scripts: dict[str, list[str]] = {}
        self.always: dict[str, str] = {}
        self.hang_s = 3.0
        self.calls: list[dict[str, Any]] = []

    def script(self, body: dict[str, Any]) -> None:
        with self.lock:
            document = str(body["document"])
            self.scripts[document] = [str(a) for a in body.get("answers", [])]
            if "always" in body:
                self.always[document] = str(body["always"])
            if "hang_s" in body:
                self.hang_s = float(body["hang_s"])

    def answer_for(self, document: str) -> str:
        with self.lock:
            queue = self.scripts.get(document)
            answer = queue.pop(0) if queue else self.always.get(document, "ok")
            self.calls.append({"document": document, "answer": answer, "at": time.time()})
            return answer


def decide(request: dict[str, Any]) -> dict[str, Any]:
    """The provider's judgement: candidates sharing a reference match."""
    asked = json.loads(request["messages"][-1]["content"])
    mine = set(asked["document"]["references"])
    return {"matches": [{"document_id": c["id"], "confidence": 0.9}
                        for c in asked["candidates"] if mine & set(c["references"])]}


def _completion(content: str) -> dict[str, Any]:
    return {"id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion", "model": "match-1",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}


def serve(provider: Provider, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

        def do_GET(self) -> None:
            if self.path == "/admin/calls":
                with provider.lock:
                    self._reply(200, list(provider.calls))
            elif self.path == "/health":
                self._reply(200, {"ok": True})
            else:
                self._reply(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            if self.path == "/admin/script":
                provider.script(self._body())
                self._reply(200, {"ok": True})
                return
            if self.path != "/v1/chat/completions":
                self._reply(404, {"error": {"message": f"Unknown request URL: POST {self.path}"}})
                return
            request = self._body()
            if provider.api_key and self.headers.get("Authorization") != f"Bearer {provider.api_key}":
                self._reply(401, {"error": {"message": "Incorrect API key provided.", "code": "invalid_api_key"}})
                return
            document = json.loads(request["messages"][-1]["content"])["document"]["id"]
            answer = provider.answer_for(document)
            if answer in _ERRORS:
                status, code, message = _ERRORS[answer]
                headers = {"Retry-After": "1"} if status == 429 else None
                self._reply(status, {"error": {"message": message, "type": code, "code": code}}, headers)
            elif answer == "garbage":
                self._reply(200, _completion("Sure! The documents that match are the first two."))
            elif answer == "schema":
                self._reply(200, _completion(json.dumps({"matches": "all of them"})))
            else:
                if answer in ("timeout", "slow"):
                    time.sleep(provider.hang_s)
                self._reply(200, _completion(json.dumps(decide(request))))

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m matching provider")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--api-key", default="", help="the key callers must send (empty: any)")
    args = parser.parse_args(argv)
    server = serve(Provider(args.api_key), args.port)
    print(f"LLM provider stand-in on http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()
