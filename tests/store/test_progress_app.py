"""Progress as an application reports and reads it, on SQLite and
PostgreSQL: a task that reports every item of a thousand writes at most
once a second; ``app.progress``, the API, the job's page and
``redrive jobs show`` read the latest, redacted; a workflow's progress is
its steps'; a bad value is a ConfigError in the task."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

import redrive
from redrive import App, ConfigError, Status, Workflow
from redrive.core.progress import progress as checked
from redrive.http import TokenAuth, create_api
from redrive.http.auth import parse_tokens
from redrive.testing import drain
from tests.canaries import CANARIES, leaked
from tests.e2e.cli import redrive as cli
from tests.http.conftest import SPECS, as_


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: Any, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'redrive.db'}"
    return request.getfixturevalue("pg_url")


def test_a_thousand_reports_write_at_most_once_a_second_and_the_latest_is_read(url: str) -> None:
    app, writes = App(url), []
    real = app.store.progress_save

    def counted(**kw: Any) -> bool:
        writes.append(kw["progress"])
        return real(**kw)

    app.store.progress_save = counted  # type: ignore[method-assign]
    took: list[float] = []

    @app.task
    def crunch(n: int) -> int:
        began = time.monotonic()
        for i in range(n):
            redrive.progress(done=i + 1, total=n, note=f"item {i + 1}")
        took.append(time.monotonic() - began)
        return n

    job = crunch.enqueue(1000).job
    drain(app)
    assert 1 <= len(writes) <= int(took[0]) + 1, (len(writes), took)  # the first, then one a second at most
    latest = app.progress(job.id)
    assert latest is not None and (latest.done, latest.total, latest.note) == (writes[-1].done, 1000, writes[-1].note)
    assert latest.share == latest.done / 1000
    app.close()


def test_the_api_the_page_and_the_cli_show_it_redacted(url: str) -> None:
    app = App(url)
    app.task(lambda: None, name="long")
    job = app.enqueue("long").job
    (running,) = app.store.jobs_claim(queues=["default"], limit=1, worker_id="w", lease_ttl=timedelta(minutes=1))
    note = f"page 3 for {CANARIES[2]}"
    assert app.store.progress_save(lease=running.lease, progress=checked(done=3, total=12, note=note))
    api = create_api(app, auth=TokenAuth(parse_tokens(SPECS)))
    ops = as_("operator", api)
    shown = ops.get(f"/api/v1/jobs/{job.id}").json()["progress"]
    assert (shown["fraction"], shown["done"], shown["total"]) == (0.25, 3, 12)
    assert shown["note"].startswith("page 3 for ") and not leaked(shown["note"])
    page = ops.get(f"/jobs/{job.id}").text
    assert 'id="progress"' in page and "3 of 12" in page and "25 %" in page and not leaked(page)
    printed = cli("jobs", "show", str(job.id), url=url)
    assert printed.returncode == 0 and "progress: 25%, 3 of 12, page 3 for " in printed.stdout, printed.stdout
    assert not leaked(printed.stdout)
    ops.close()
    app.close()


def test_a_workflows_progress_is_its_steps_and_a_bad_value_fails_the_task(url: str) -> None:
    app = App(url)

    @app.task(max_attempts=1)
    def step(n: int) -> None:
        if n == 3:
            redrive.progress(1.5)

    wf = Workflow("four")
    wf.map((step.call(n) for n in range(4)), name="parts")
    made = app.create_workflow(wf)
    assert app.workflow(made.id).progress == 0.0
    drain(app, max_attempts=2)
    assert app.workflow(made.id).progress == 0.5
    drain(app)
    assert app.workflow(made.id).progress == 1.0
    (failed,) = [j for j in app.admin(redrive.Actor.operator("ops")).jobs(status=Status.FAILED).items]
    assert failed.error_message is not None and "progress fraction is a number from 0 to 1" in failed.error_message
    with pytest.raises(ConfigError, match="only available inside a running task"):
        redrive.progress(0.5)
    app.close()
