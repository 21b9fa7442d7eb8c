"""`redrive serve`: a one-line error without tokens, or for a bad token line;
served, it answers, its access log shows no secret (percent-encoded ones
included), and SIGTERM stops it cleanly."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import httpx

from redrive.testing import wait_for
from tests.e2e.cli import REPO, redrive
from tests.e2e.test_cli import assert_clean_error


def test_serve_refuses_to_start_without_tokens(tmp_path) -> None:
    result = redrive("serve", "--database-url", f"sqlite:///{tmp_path / 'r.db'}")
    assert_clean_error(result, "CONFIG_INVALID", "REDRIVE_API_TOKENS")


def test_serve_answers_and_stops_cleanly_on_sigterm(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert redrive("migrate", "--database-url", url).returncode == 0
    env = {**os.environ, "PYTHONPATH": str(REPO), "REDRIVE_API_TOKENS": "op-0123456789abcdef=operator:ops"}
    output = tmp_path / "serve.log"
    with open(output, "w") as out:  # --port 0: a port the system picks, which it says
        server = subprocess.Popen([sys.executable, "-m", "redrive", "serve", "--database-url", url, "--port", "0"],
                                  cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        def listening() -> str | None:
            found = re.search(r"running on (http://127\.0\.0\.1:\d+)", output.read_text())
            return found.group(1) if found else None

        base = wait_for(listening, timeout=30, what="redrive serve saying where it listens")

        def ready() -> bool:
            try:
                return httpx.get(f"{base}/readyz").status_code == 200
            except httpx.TransportError:
                return False

        wait_for(ready, timeout=30)
        answer = httpx.get(f"{base}/api/v1/queues", headers={"Authorization": "Bearer op-0123456789abcdef"})
        assert answer.status_code == 200 and answer.json() == {"items": []}
        # httpx percent-encodes a query's @ and =: the access log redacts what they hide
        for params in ({"idempotency_key": "welcome.grace@example.org"}, {"task": "password=hunter2-sekrit"}):
            assert httpx.get(f"{base}/api/v1/jobs", params=params,
                             headers={"Authorization": "Bearer op-0123456789abcdef"}).status_code == 200
        wait_for(lambda: output.read_text().count("GET /api/v1/jobs") >= 2, timeout=10, what="the access log lines")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    said = output.read_text()
    assert server.returncode == 0, said
    assert "Traceback" not in said and "op-0123456789abcdef" not in said
    for secret in ("welcome.grace", "grace%40example", "hunter2-sekrit"):
        assert secret not in said, said
    assert "[EMAIL]" in said and "password=[REDACTED]" in said
