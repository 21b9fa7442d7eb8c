"""Each reference system's "Run it" block, pasted as written into a fresh
clone (a git repository holding the example and the project's .gitignore):
every command succeeds, the block does what it says, and nothing it leaves
behind dirties the tree."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.snippets import REPO

pytestmark = pytest.mark.slow

EXAMPLES = ["criticizer", "matching", "matchmaking", "review_notify"]


def run_it(example: str) -> str:
    text = (REPO / "examples" / example / "README.md").read_text()
    found = re.search(r"^## Run it\n.*?^```sh\n(.*?)^```", text, re.S | re.M)
    assert found, f"examples/{example}/README.md has no sh block under 'Run it'"
    return found.group(1)


def _git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=clone, check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_run_it_block_works_as_pasted_and_leaves_the_tree_clean(example: str, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(REPO / "examples" / example, clone / "examples" / example,
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(REPO / ".gitignore", clone / ".gitignore")
    _git(clone, "init", "-q")
    _git(clone, "add", "-A")
    _git(clone, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "clone")
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDRIVE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # the project's environment
    script = "set -euo pipefail\n" + run_it(example) + "\nsleep 2\n"  # the background parts at work a moment
    log = tmp_path / "run-it.log"  # not a pipe: the parts left running would hold it open
    with log.open("w") as written:
        shell = subprocess.Popen(["bash", "-c", script], cwd=clone, env=env, stdout=written,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    try:
        shell.wait(timeout=120)
    finally:
        try:
            os.killpg(shell.pid, signal.SIGTERM)  # the parts the block left running
        except ProcessLookupError:
            pass
        time.sleep(1)
        try:
            os.killpg(shell.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    out = log.read_text()
    assert shell.returncode == 0, out[-3000:]
    if example == "review_notify":
        assert '"review_version":1,"duplicate":false' in out, out[-2000:]  # the review was created
    assert _git(clone, "status", "--porcelain", "--untracked-files=all") == "", out[-2000:]
