"""`redrive serve`: a one-line error without tokens, or for a bad token line;
served, it answers, and SIGTERM stops it cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import httpx

from redrive.testing import wait_until
from tests.e2e.test_cli import REPO, assert_clean_error, redrive


def test_serve_refuses_to_start_without_tokens(tmp_path) -> None:
    result = redrive("serve", "--database-url", f"sqlite:///{tmp_path / 'r.db'}")
    assert_clean_error(result, "CONFIG_INVALID", "REDRIVE_API_TOKENS")


def test_serve_answers_and_stops_cleanly_on_sigterm(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert redrive("migrate", "--database-url", url).returncode == 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(REPO), "REDRIVE_API_TOKENS": "op-0123456789abcdef=operator:ops"}
    server = subprocess.Popen([sys.executable, "-m", "redrive", "serve", "--database-url", url, "--port", str(port)],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def ready() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
            except httpx.TransportError:
                return False

        wait_until(ready, timeout=30)
        answer = httpx.get(f"http://127.0.0.1:{port}/api/v1/queues",
                           headers={"Authorization": "Bearer op-0123456789abcdef"})
        assert answer.status_code == 200 and answer.json() == {"items": []}
    finally:
        server.send_signal(signal.SIGTERM)
        out, _ = server.communicate(timeout=30)
    assert server.returncode == 0, out
    assert "Traceback" not in out and "op-0123456789abcdef" not in out
