"""A newcomer's first hour, from a fresh copy of the repository: the demo and
its closing hints as printed, then the README's Quickstart in a project of
their own (its own virtual environment, redrive installed from the checkout)
moved to PostgreSQL by the app's URL in code. Every command must talk to the
app's database: nothing may land in a SQLite file."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from redrive import Actor, Admin, Status
from tests.e2e.snippets import REPO, Reader, snippets

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def _fresh_copy(to: Path) -> None:
    """What a clone of this tree holds: tracked files and new ones not ignored."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)


def _env(path_first: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDRIVE_", "VIRTUAL_ENV"))}
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env['PATH']}"
    return env


def _converter_processes(clone: Path) -> list[str]:
    """Command lines of processes running a part of the converter from
    ``clone`` (its own virtual environment's Python): tests running beside
    this one start converters of their own."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"converter" in line and b"-m" in line and str(clone).encode() in line[0]:
            found.append(b" ".join(line).decode(errors="replace"))
    return found


def test_the_demo_then_the_quickstart_on_postgresql(tmp_path: Path, pg_empty_url: str) -> None:
    clone = tmp_path / "redrive"
    _fresh_copy(clone)
    # The demo, from nothing: it makes its own environment, tells its story and stops all it started
    demo = subprocess.run(["./scripts/demo"], cwd=clone, env=_env(), capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stderr[-3000:]
    for shown in ("open http://127.0.0.1:", "400 NOT_PDF: Only PDF files are supported.",
                  "413 TOO_LARGE: File exceeds 50 MB limit.", "GW_4XX Couldn’t convert this file",
                  "the gateway's breaker is open", "the breaker closed", "every process the demo started has stopped"):
        assert shown in demo.stdout, (shown, demo.stdout)
    assert demo.stdout.count(": complete") >= 7  # the good uploads, those held through the outage included
    assert _converter_processes(clone) == []
    hints = re.findall(r"^\s*(?:look closer|the failed): (.+)$", demo.stdout, re.MULTILINE)
    assert len(hints) == 2, demo.stdout
    for hint in hints:  # each works as printed, from the checkout
        shown = subprocess.run(["bash", "-c", hint], cwd=clone, env=_env(), capture_output=True, text=True,
                               timeout=60)
        assert shown.returncode == 0 and "convert" in shown.stdout, (hint, shown.stderr)

    # Their own project: the README's install step with the checkout's path
    project = tmp_path / "myproject"
    project.mkdir()
    readme = snippets(clone / "README.md")
    (install,) = [s for s in readme if "pip install /path/to/redrive" in s.code]
    script = install.code.replace("/path/to/redrive", str(clone))
    installed = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=project, env=_env(),
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]

    # The Quickstart's files, with the app's URL switched to PostgreSQL in code
    files = [s for s in readme if "file" in s.how]
    (tasks,) = [s for s in files if s.how["file"] == "myapp/tasks.py"]
    assert 'App("sqlite:///redrive.db")' in tasks.code
    tasks.code = tasks.code.replace('App("sqlite:///redrive.db")', f'App("{pg_empty_url}")')
    (migrate,) = [s for s in readme if s.lang == "bash" and s.code.startswith("redrive migrate")]
    (worker,) = [s for s in readme if "background" in s.how and "--queue email --queue default" in s.code]
    (look,) = [s for s in readme if s.lang == "bash" and s.code.startswith("python enqueue.py")]

    reader = Reader(project, _env(project / ".venv" / "bin"), pg_empty_url)
    try:
        for snippet in [*files, migrate, worker, look]:
            reader.run(snippet)
    finally:
        reader.close()
    printed = "\n".join(reader.outputs)
    assert "'user_id': 42" in printed and "'sent': True" in printed and "summary of document 7" in printed
    assert "send_welcome" in printed and "summarize" in printed  # jobs list read PostgreSQL
    assert not list(project.rglob("*.db")), "a command used a SQLite file instead of the app's database"
    with Admin.open(pg_empty_url, actor=Actor.operator("test")) as admin:
        statuses = {job.task: job.status for job in admin.jobs(limit=100).items if job.args in ([42], [7])}
    assert statuses == {"send_welcome": Status.SUCCEEDED, "summarize": Status.SUCCEEDED}
