"""The conversion gateway: a separate process that turns a PDF into XML
(its pages and their text, read with pypdf), and that can be told to fail
the ways the real one does, so the worker's handling of each can be seen.

    python -m converter.gateway --port 8081

``POST /convert?mapping=M&key=K`` with the PDF as the body answers the XML;
an unknown mapping is a 400 ("Unsupported mapping."), a body that is not a
PDF a 415. ``POST /admin/mode`` with ``{"mode": ...}`` makes every call
answer a status (``"500"``, ``"502"``, ``"406"``...), ``"hang"`` (answer
after ``hang_s``) or ``"ok"``; ``GET /health`` is 200 only in ``ok``;
``GET /admin/calls`` lists the conversion calls (key, wall time, status).
"""

from __future__ import annotations

import argparse
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape, quoteattr

MAPPINGS = ("invoice", "receipt", "generic")
MAX_BODY = 60 * 1024 * 1024


class Gateway(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.mode = "ok"
        self.hang_s = 60.0
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()


def to_xml(pdf: bytes, mapping: str) -> str:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(pdf))
    pages = "".join(f'<page n="{n}">{escape(page.extract_text() or "")}</page>'
                    for n, page in enumerate(reader.pages, 1))
    return f'<?xml version="1.0" encoding="utf-8"?>\n<document mapping={quoteattr(mapping)} ' \
           f'pages="{len(reader.pages)}">{pages}</document>\n'


class _Handler(BaseHTTPRequestHandler):
    server: Gateway
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the tests read /admin/calls
        pass

    def _answer(self, status: int, body: str, kind: str = "application/json") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ValueError("too large")
        return self.rfile.read(length)

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/health":
            ok = self.server.mode == "ok"
            self._answer(200 if ok else 503, json.dumps({"ok": ok, "mode": self.server.mode}))
        elif path == "/admin/calls":
            with self.server.lock:
                self._answer(200, json.dumps(self.server.calls))
        else:
            self._answer(404, json.dumps({"error": "no such path"}))

    def do_POST(self) -> None:
        # A call is timed when it arrives, not after the conversion (whose
        # first run also imports pypdf): the spacing of retries is measured
        # between arrivals.
        arrived = time.time()
        url = urlsplit(self.path)
        if url.path == "/admin/mode":
            wanted = json.loads(self._body() or b"{}")
            self.server.mode = str(wanted.get("mode", "ok"))
            self.server.hang_s = float(wanted.get("hang_s", self.server.hang_s))
            self._answer(200, json.dumps({"mode": self.server.mode}))
            return
        if url.path != "/convert":
            self._answer(404, json.dumps({"error": "no such path"}))
            return
        query = parse_qs(url.query)
        mapping, key = query.get("mapping", [""])[0], query.get("key", [""])[0]
        body = self._body()
        status, answer, kind = self._convert(body, mapping)
        with self.server.lock:
            self.server.calls.append({"key": key, "at": arrived, "status": status, "mode": self.server.mode})
        if status == 0:  # hang: answer late, after the caller gave up
            time.sleep(self.server.hang_s)
            status = 200
        self._answer(status, answer, kind)

    def _convert(self, body: bytes, mapping: str) -> tuple[int, str, str]:
        mode = self.server.mode
        if mode.isdigit():
            return int(mode), json.dumps({"error": f"the gateway answers {mode} (mode)"}), "application/json"
        if mapping not in MAPPINGS:
            return 400, json.dumps({"error": "Unsupported mapping."}), "application/json"
        try:
            xml = to_xml(body, mapping)
        except Exception:
            return 415, json.dumps({"error": "The file could not be read as a PDF."}), "application/json"
        return (0 if mode == "hang" else 200), xml, "application/xml"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="converter.gateway", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    args = parser.parse_args(argv)
    server = Gateway((args.host, args.port))
    print(f"gateway listening on http://{args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
