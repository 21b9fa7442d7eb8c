"""The JSON log: event lines gather and are written together, soon, in order
with the records around them, and all of them by the time the process ends."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _python(code: str, stderr: Path) -> subprocess.Popen:
    with open(stderr, "w") as err:
        return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, stderr=err,
                                stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)


PRELUDE = """
    import logging, sys, time
    from redrive import App, logs
    app = App("sqlite:///{db}")
    logs.configure(level="info", fmt="json")
    logs.log_events(app)
    def succeeded(i):
        app.events.emit("job.succeeded", job_id=f"job-{{i}}", task="t", queue="q", attempt=1, duration_s=0.5)
"""


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_event_lines_are_written_soon_without_an_exit_or_a_flush(tmp_path) -> None:
    err = tmp_path / "err"
    proc = _python(PRELUDE.format(db=tmp_path / "r.db") + """
    for i in range(3):
        succeeded(i)
    print("emitted", flush=True)
    sys.stdin.readline()  # stays alive, writes nothing more, until told
    """, err)
    try:
        assert proc.stdout.readline() == "emitted\n"
        deadline = time.monotonic() + 5
        while len(err.read_text().splitlines()) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        lines = _lines(err)
        assert [line["job_id"] for line in lines] == ["job-0", "job-1", "job-2"]
        assert lines[0]["duration_ms"] == 500.0 and lines[0]["status"] == "succeeded"
        assert lines[0]["ts"].endswith("+00:00") and len(lines[0]["ts"]) == len("2026-11-23T15:33:09.244+00:00")
    finally:
        proc.communicate("\n", timeout=10)


def test_records_and_event_lines_keep_their_order_and_none_is_lost_at_exit(tmp_path) -> None:
    err = tmp_path / "err"
    proc = _python(PRELUDE.format(db=tmp_path / "r.db") + """
    log = logging.getLogger("mine")
    for i in range(1200):   # more than a batch
        succeeded(i)
        if i % 500 == 0:
            log.warning("after %d", i)
    for i in range(1200, 1210):
        succeeded(i)
    """, err)
    proc.communicate(timeout=30)
    assert proc.returncode == 0
    order = [line.get("job_id") or line["message"] for line in _lines(err)]
    expected = []
    for i in range(1210):
        expected.append(f"job-{i}")
        if i % 500 == 0 and i < 1200:
            expected.append(f"after {i}")
    assert order == expected
