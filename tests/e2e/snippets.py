"""Reading the code blocks of a Markdown file and running them as a reader
would, in a project directory of their own.

A comment right above a block says how it runs:

- ``<!-- snippet: file=myapp/tasks.py -->``: the reader saves it as that file;
- ``<!-- snippet: fakes=a,b -->``: Python run with those fakes (from
  ``tests/fakes/snippets.py``) and nothing else supplied;
- ``<!-- snippet: background -->``: a command that runs until stopped (a
  worker); it is stopped with SIGTERM once the next block has run;
- ``<!-- snippet: skip, run by PATH ... -->``: run elsewhere, by the file named.

Without a comment, Python runs in the document's namespace (blocks of one
document share it, as a reader's session would) and shell blocks run with
bash, every command required to succeed. Placeholders a reader fills in
(``<job id>``, ``<failed job id>``, ``<dead letter id>``) are filled from the
project's database when the command runs.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from contextlib import chdir
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tests.fakes.snippets as fakes
from redrive import Actor, Admin, Status

REPO = Path(__file__).resolve().parents[2]
_MARKER = re.compile(r"^<!-- snippet: (.*) -->$")
_FENCE = re.compile(r"^```(\w*)$")
PLACEHOLDERS = ("<job id>", "<failed job id>", "<dead letter id>")


@dataclass
class Snippet:
    source: Path
    line: int
    lang: str
    code: str
    how: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.source.relative_to(REPO)}:{self.line}"


def snippets(path: Path) -> list[Snippet]:
    found: list[Snippet] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        marker = _MARKER.match(lines[i - 1]) if i else None
        end = lines.index("```", i + 1)
        how: dict[str, str] = {}
        if marker and marker.group(1).startswith("skip"):
            how["skip"] = marker.group(1)
        elif marker:
            how = dict(token.partition("=")[::2] for token in marker.group(1).split())
        found.append(Snippet(path, i + 1, fence.group(1), "\n".join(lines[i + 1:end]) + "\n", how))
        i = end + 1
    return found


class Reader:
    """Runs one document's snippets in order, in ``project``."""

    def __init__(self, project: Path, env: dict[str, str], database_url: str) -> None:
        self.project = project
        self.env = env
        self.database_url = database_url  # where placeholders are looked up
        self.namespace: dict[str, Any] = {"__name__": "__snippet__"}
        self.background: subprocess.Popen | None = None
        self.outputs: list[str] = []

    def run(self, snippet: Snippet) -> None:
        stop_after = self.background
        if "skip" in snippet.how:
            named = re.findall(r"[\w./-]+\.py|\.ci/run", snippet.how["skip"])
            assert named and all((REPO / n).exists() for n in named), f"{snippet.where}: say what runs it"
        elif "file" in snippet.how:
            target = self.project / snippet.how["file"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(snippet.code)
        elif snippet.lang == "python":
            self._python(snippet)
        elif snippet.lang == "bash":
            self._bash(snippet)
        else:
            raise AssertionError(f"{snippet.where}: a block of {snippet.lang or 'no language'} cannot be run")
        if stop_after is not None:
            self.stop()

    def _python(self, snippet: Snippet) -> None:
        names = [n for n in snippet.how.get("fakes", "").split(",") if n]
        for name in names:
            self.namespace[name] = getattr(fakes, name)
        sys.path.insert(0, str(self.project))
        try:
            with chdir(self.project):
                exec(compile(snippet.code, snippet.where, "exec"), self.namespace)
        finally:
            sys.path.remove(str(self.project))

    def _bash(self, snippet: Snippet) -> None:
        script = snippet.code
        for placeholder in PLACEHOLDERS:  # looked up when the command runs, as a reader would
            lookup = f'{sys.executable} -m tests.e2e.snippets "{placeholder}" "{self.database_url}"'
            script = script.replace(placeholder, f"$(PYTHONPATH={REPO} {lookup})")
        if "background" in snippet.how:
            self.background = subprocess.Popen(
                ["bash", "-c", f"exec {script.strip()}"], cwd=self.project, env=self.env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            )
            return
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.project, env=self.env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{snippet.where} failed:\n{script}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        self.outputs.append(done.stdout)

    def stop(self) -> None:
        if self.background is None:
            return
        process, self.background = self.background, None
        os.killpg(process.pid, signal.SIGTERM)
        out, _ = process.communicate(timeout=40)
        assert process.returncode == 0, out
        assert "Traceback" not in out, out
        self.outputs.append(out)

    def close(self) -> None:
        if self.background is not None:
            os.killpg(self.background.pid, signal.SIGKILL)
            self.background.wait()
            self.background = None
        for name in [m for m in sys.modules if m == "myapp" or m.startswith("myapp.") or m == "enqueue"]:
            module = sys.modules.pop(name)
            app = getattr(module, "app", None)
            if hasattr(app, "close"):
                app.close()
        for value in self.namespace.values():
            if type(value).__name__ == "App" and hasattr(value, "close"):
                value.close()


def lookup(placeholder: str, database_url: str) -> str:
    """The id a reader would pick for a placeholder, from what the database
    holds now: the newest job, the oldest open dead letter, a failed job."""
    with Admin.open(database_url, actor=Actor.operator("reader")) as admin:
        if placeholder == "<dead letter id>":
            return str(admin.dead_letters(state="open", limit=1000).items[-1].id)
        jobs = admin.jobs(limit=1000).items
        if placeholder == "<job id>":
            return str(jobs[0].id)
        return str(next(j.id for j in jobs if j.status is Status.FAILED))


if __name__ == "__main__":
    print(lookup(sys.argv[1], sys.argv[2]))
