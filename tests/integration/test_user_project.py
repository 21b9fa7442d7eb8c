"""A user's own project (tests/userproject) tested with nothing but the
documented testing kit, run as the user runs it: pytest in that folder, in
a process of its own, the plugin found through redrive's entry point. Its
tests pass; with a bug planted in its code, the test that covers it fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from redrive import App

PROJECT = Path(__file__).resolve().parents[1] / "userproject"


def _pytest(tmp_path: Path, *options: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(PROJECT),
         "-c", os.devnull, *options, "tests"],
        cwd=PROJECT, capture_output=True, text=True, timeout=120,
        env={**{k: v for k, v in os.environ.items() if not k.startswith(("REDRIVE_", "PYTEST_"))},
             "PYTHONPATH": str(PROJECT), **env})


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_the_projects_tests_pass_and_catch_a_planted_bug(tmp_path: Path) -> None:
    passed = _pytest(tmp_path)
    assert passed.returncode == 0, passed.stdout[-3000:]
    assert "3 passed" in passed.stdout
    assert not (PROJECT / "shop.db").exists()  # the app's own database was never touched
    broken = _pytest(tmp_path, SHOP_PLANTED_BUG="1")
    assert broken.returncode == 1, broken.stdout[-3000:]
    assert "1 failed, 2 passed" in broken.stdout
    assert "test_placing_an_order_enqueues_its_fulfilment_and_its_receipt" in broken.stdout
    assert "send_receipt jobs enqueued: 1 (args=[7, 'ADA@EXAMPLE.COM']" in broken.stdout


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_the_projects_tests_pass_on_its_postgresql_test_database(tmp_path: Path, pg_test_database: str) -> None:
    passed = _pytest(tmp_path, "--redrive-database", pg_test_database)
    assert passed.returncode == 0, passed.stdout[-3000:]
    assert "3 passed" in passed.stdout
    # The last test's jobs are there: the tests ran on that database, each after emptying it
    app = App(pg_test_database)
    assert sorted(j.args for j in app.client.jobs(limit=10).items) == [[8, 0], [9, 500]]
    app.close()
