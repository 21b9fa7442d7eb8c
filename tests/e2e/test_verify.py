"""`redrive verify` against a deployment's own database: a scratch database
it creates and drops, the figures in one table, exit 1 naming the figure
when a planted bug makes a checker fire."""

from __future__ import annotations

import psycopg
import pytest

from tests.conftest import PG_SERVER
from tests.e2e.cli import redrive, redrive_process
from tests.e2e.test_cli import APP
from tests.figures import record

pytestmark = pytest.mark.slow


def _their_jobs(url: str) -> list[str]:
    return redrive("jobs", "list", "--json", url=url).stdout.splitlines()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_verify_passes_on_a_sound_store_and_leaves_no_trace(kind: str, request, tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'theirs.db'}" if kind == "sqlite" else request.getfixturevalue("pg_url")
    assert redrive("enqueue", APP, "record", "--args", '["theirs"]', url=url).returncode == 0
    before = _their_jobs(url)
    result = redrive_process("verify", "--database-url", url, "--profile", "quick", timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.rsplit(None, 2)[0].strip(): line.split()[-1] for line in result.stdout.splitlines()[1:]}
    for figure in ("lost", "more than one ending", "illegal transitions", "succeeded without running",
                   "stale writes accepted", "joins released more than once", "joins never released",
                   "children spawned more than once", "planted bugs missed by the checks"):
        assert rows[figure] == "ok", result.stdout
    values = {line.rsplit(None, 2)[0].strip(): int(line.split()[-2]) for line in result.stdout.splitlines()[1:]}
    assert values["workflows (fan-outs and their joins)"] == 30  # 20 created, 10 spawned under the kills
    for line in result.stdout.splitlines()[1:]:
        name, value, verdict = line.rsplit(None, 2)
        record(f"redrive verify --profile quick ({kind})", name.strip(), value, "0" if verdict == "ok" else "-")
    assert _their_jobs(url) == before  # their jobs untouched
    if kind == "sqlite":
        assert not list(tmp_path.glob(".redrive_verify_*"))  # the scratch file went beside theirs, and is gone
    else:
        with psycopg.connect(f"{PG_SERVER}/postgres") as admin:
            left = admin.execute("SELECT datname FROM pg_database WHERE datname LIKE 'redrive_verify_%'").fetchall()
        assert left == []


@pytest.mark.parametrize(("plant", "figure"), [("stale_write", "stale writes accepted"),
                                               ("join_twice", "joins released more than once")])
def test_a_planted_bug_fails_verify_naming_its_figure(tmp_path, plant: str, figure: str) -> None:
    url = f"sqlite:///{tmp_path / 'theirs.db'}"
    result = redrive_process("verify", "--database-url", url, "--plant", plant, timeout=240)
    assert result.returncode == 1
    assert result.stderr.strip() == f"redrive: verify failed: {figure}"
    assert "FAILED (must be at most 0)" in result.stdout
