"""Every Python and shell snippet of the README and docs/ runs as written (see
``tests/e2e/snippets.py`` for how a block says how it runs), so a snippet that
stops working fails CI. Here on SQLite in a fresh project directory;
``test_readme_path.py`` follows the README from a fresh clone onto PostgreSQL."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from redrive import Actor, Admin, Status
from tests.e2e.snippets import REPO, Reader, snippets

DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def reader_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDRIVE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # where `redrive` is installed
    return env


def test_every_block_of_every_document_says_how_it_runs() -> None:
    found = {doc.name: snippets(doc) for doc in DOCUMENTS}
    assert len(found["README.md"]) >= 15
    for doc in found.values():
        for snippet in doc:
            assert snippet.lang in ("python", "bash"), f"{snippet.where}: say the block's language"
            assert set(snippet.how) <= {"skip", "file", "fakes", "background"}, snippet.where


# The README's story starts workers and runs a dozen commands (half a
# minute): CI runs it, --quick does not; the docs' snippets are quick.
@pytest.mark.parametrize("document", [
    pytest.param(d, marks=pytest.mark.slow) if d.name == "README.md" else d for d in DOCUMENTS if snippets(d)
], ids=lambda d: d.name)
def test_the_snippets_run(document: Path, tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'redrive.db'}"
    reader = Reader(tmp_path, reader_env(), database_url)
    try:
        for snippet in snippets(document):
            reader.run(snippet)
        reader.stop()
    finally:
        reader.close()
    if document.name == "README.md":
        _the_readme_did_what_it_says(reader, database_url)


def _the_readme_did_what_it_says(reader: Reader, database_url: str) -> None:
    printed = "\n".join(reader.outputs)
    # The Quickstart's worker served both queues: the script got both results
    assert "'user_id': 42" in printed and "'sent': True" in printed and "summary of document 7" in printed
    # Every command used the app's database (one file, in the project)
    assert sorted(p.name for p in reader.project.glob("*.db")) == ["redrive.db"]
    with Admin.open(database_url, actor=Actor.operator("test")) as admin:
        jobs = admin.jobs(limit=1000).items
        by_task: dict[str, list[Status]] = {}
        for job in jobs:
            by_task.setdefault(job.task, []).append(job.status)
        assert by_task["summarize"].count(Status.CANCELLED) == 1  # the one cancelled from the command line
        assert Status.SUCCEEDED in by_task["send_welcome"]
        assert admin.dead_letters(state="replayed").items  # replayed from the command line
        assert [q.paused_by for q in admin.queues() if q.queue == "email"] in ([], [None])  # resumed
