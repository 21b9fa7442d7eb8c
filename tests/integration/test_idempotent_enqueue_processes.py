"""Five processes enqueue the same 2,000 idempotency keys at once: exactly
one job per key, and every process is told the same job id for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from redrive import App, job_id_for
from redrive.testing import count_jobs
from tests.conftest import every_job
from tests.integration.processes import REPO

KEYS = 2000
PROCESSES = 5


@pytest.mark.pgbouncer
@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_concurrent_enqueues_of_the_same_keys_make_one_job_each(db_url: str, tmp_path) -> None:
    # Through PgBouncer each enqueue waits for a pooled session: fewer keys race the same way
    keys = KEYS // 4 if os.environ.get("REDRIVE_DATABASE_POOL_MODE") == "transaction" else KEYS
    App(db_url).store.close()  # the schema exists before the race (SQLite migrates on open)
    go = tmp_path / "go"
    outs = [tmp_path / f"out-{i}.json" for i in range(PROCESSES)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen([sys.executable, "-m", "tests.apps.enqueuer", db_url, str(seed), str(keys),
                          str(go), str(out)], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
        for seed, out in enumerate(outs)
    ]
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err

    seen = [json.loads(out.read_text()) for out in outs]
    created = sum(not dup for s in seen for _, dup in s.values())
    assert created == keys  # one process created each key, the others were told it existed
    for n in range(keys):
        expected = str(job_id_for("offer", f"2026-11-22:Europe/London:u{n}", 1))
        assert {s[str(n)][0] for s in seen} == {expected}

    app = App(db_url)
    assert sum(count_jobs(app.store).values()) == keys
    assert len(every_job(app.client)) == keys
    app.close()
