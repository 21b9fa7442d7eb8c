"""The API reference is built from the public docstrings by the documented
command (``scripts/api-docs``), so it cannot rot: every name ``import
redrive`` exports has its entry, with its docstring, and the build warns of
nothing."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import redrive

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # pdoc imports and renders every module: a few seconds


def test_the_reference_builds_and_documents_every_public_name(tmp_path: Path) -> None:
    built = subprocess.run(["bash", str(REPO / "scripts" / "api-docs"), str(tmp_path)], capture_output=True,
                           text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    warnings = [line for line in built.stderr.splitlines() if line.startswith("Warn") and "Suppressed execution"
                not in line]
    assert not warnings, warnings
    page = (tmp_path / "redrive.html").read_text()
    documented = set(re.findall(r'<section id="([A-Za-z_][\w.]*)">', page))
    missing = [name for name in redrive.__all__ if name not in documented]
    assert not missing, f"public names with no entry in the reference: {missing}"
    # docstrings come through, such as App.task's
    assert "hard_timeout" in page and "Register a sync or async function as a task" in page
    for module in ("testing", "transactions", "metrics", "http", "notify", "alerts", "events", "errors"):
        assert (tmp_path / "redrive" / f"{module}.html").exists(), module
    assert "drain" in (tmp_path / "redrive" / "testing.html").read_text()
