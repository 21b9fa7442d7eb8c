"""A small fault proxy in front of a real HTTP service: it relays requests
untouched, or fails them the ways a network and a struggling service do.

The first path segment chooses the fault; the rest goes to the service:

- ``/pass/...``: relayed as is;
- ``/status/<code>/...``: the service is not called; the proxy answers that
  status (with ``Retry-After: 1`` on 429 and 503, and an explanatory body);
- ``/reset/...``: the connection is reset (RST) once the request is read;
- ``/truncated/...``: the service's answer, cut off halfway through its body;
- ``/slow-body/...``: the service's headers, then its body a byte a second;
- ``/garbage/...``: a 200 whose body is not the JSON it claims to be.

Every request is counted by fault, so a test can see what reached the proxy.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 408: "Request Timeout",
            409: "Conflict", 410: "Gone", 413: "Payload Too Large", 422: "Unprocessable Entity",
            429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
            503: "Service Unavailable", 504: "Gateway Timeout"}


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        target = urlsplit(upstream)
        self._upstream = (target.hostname or "127.0.0.1", target.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=256)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()

    def _handle(self, conn: socket.socket) -> None:
        try:
            head = _read_head(conn)
            if head is None:
                return
            method, target, rest = head
            parts = target.split("/", 2)  # "", fault, the rest
            fault = parts[1] if len(parts) > 1 else ""
            forward = "/" + (parts[2] if len(parts) > 2 else "")
            with self._lock:
                self.seen[fault] += 1
            if fault == "status":
                code_text, _, forward = forward[1:].partition("/")
                self._answer(conn, int(code_text))
            elif fault == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            elif fault == "garbage":
                body = b'{"result": "abc'
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
            else:
                response = self._relay(method, forward, rest)
                header, _, body = response.partition(b"\r\n\r\n")
                if fault == "truncated":
                    conn.sendall(header + b"\r\n\r\n" + body[: len(body) // 2])
                elif fault == "slow-body":
                    conn.sendall(header + b"\r\n\r\n")
                    for byte in body:
                        time.sleep(1)
                        conn.sendall(bytes([byte]))
                else:
                    conn.sendall(response)
        except OSError:
            pass  # the client gave up: that is its business
        finally:
            conn.close()

    def _answer(self, conn: socket.socket, status: int) -> None:
        body = {400: b'{"error": "maximum context length exceeded"}'}.get(status, b'{"error": "injected"}')
        extra = b"Retry-After: 1\r\n" if status in (429, 503) else b""
        conn.sendall(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n%s" % (status, _REASONS[status].encode(), extra, len(body), body))

    def _relay(self, method: str, path: str, rest: bytes) -> bytes:
        with socket.create_connection(self._upstream, timeout=10) as up:
            up.sendall(f"{method} {path} HTTP/1.0\r\n".encode() + rest)
            chunks = []
            while chunk := up.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)


def _read_head(conn: socket.socket) -> tuple[str, str, bytes] | None:
    """The request line, and its headers (with Connection: close) and body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    line, _, rest = data.partition(b"\r\n")
    method, target, _ = line.decode("latin-1").split(" ", 2)
    headers = [h for h in rest.split(b"\r\n") if not h.lower().startswith(b"connection:")]
    return method, target, b"\r\n".join(headers)


@contextmanager
def fault_proxy(upstream: str) -> Iterator[FaultProxy]:
    proxy = FaultProxy(upstream)
    thread = threading.Thread(target=proxy.serve, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.close()
        thread.join(5)
