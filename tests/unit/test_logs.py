"""The JSON log: event lines gather and are written together, soon, in order
with the records around them, and all of them by the time the process ends."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from redrive.testing import wait_for

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
        app.events.emit("job.succeeded", job_id=f"job-{{i}}", task="t", queue="q", attempt=1, duration_s=0.5,
                           wait_s=0.0)
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
        wait_for(lambda: len(err.read_text().splitlines()) >= 3, timeout=5, what="three lines written")
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


def test_an_event_line_says_what_its_record_would_say() -> None:
    """The worker's quick path (a line made field by field) and the logging
    path (a record through JsonFormatter) write the same JSON for every event."""
    import logging

    from redrive.events import CATALOGUE, EVENTS
    from redrive.logs import _OURS, JsonFormatter, _event_line, event_fields
    from tests.canaries import CANARIES, leaked

    samples = ["plain", "ünïcode ✓", 'quote " and \\ slash', CANARIES[0], f"send to {CANARIES[2]}", None, 3, 2.5,
               True, False, ["default", CANARIES[1]], {"nested": CANARIES[4]}, float("inf")]
    for n, (name, keys) in enumerate(sorted(CATALOGUE.items())):
        # Fields redrive makes itself hold ids, counts and its own words; the rest may hold anything
        data = {key: (7 if key in _OURS else samples[(n + i) % len(samples)]) for i, key in enumerate(sorted(keys))}
        data |= {k: 0.25 for k in ("duration_s", "wait_s") if k in keys}
        if name == "breaker.changed":
            data["to_state"] = "open"
        event = EVENTS[name](**data, at=1_700_000_000.123)
        quick = json.loads(_event_line(event, "info", "redrive.event"))
        record = logging.LogRecord("redrive.event", logging.INFO, __file__, 1, "x", None, None)
        record.created, record.redrive = event.at, event_fields(event)
        slow = json.loads(JsonFormatter().format(record))
        assert quick == slow, name
        assert leaked(json.dumps(quick)) == [] and "lease_token" not in quick
