"""Skip if done (seed 002 §8): a retry that finds the task's result already
written counts as success without running the body again."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from redrive import App, ConfigError, Fixed, Status, Transient, current_job
from tests.integration.test_worker_in_process import _run_until


def test_a_retry_after_a_stalled_status_write_succeeds_without_redoing_the_work(
        sqlite_url: str, tmp_path: Path) -> None:
    app = App(sqlite_url)
    out = tmp_path / "out"
    out.mkdir()
    bodies: list[str] = []

    def existing_xml(doc: str) -> str | None:
        path = out / f"{doc}.xml"
        return str(path) if path.exists() else None

    @app.task(already_done=existing_xml, backoff=Fixed([timedelta(milliseconds=10)]))
    def convert(doc: str) -> str:
        bodies.append(doc)
        (out / f"{doc}.xml").write_text("<xml/>")
        if current_job().attempts == 1:  # the work is done, then the status write stalls
            raise Transient("database write timed out", code="DB_TIMEOUT")
        return str(out / f"{doc}.xml")

    @app.task
    async def fresh(doc: str) -> str:
        return doc

    async def nothing_there(doc: str) -> None:
        await asyncio.sleep(0)
        return None

    # An async check that finds nothing lets the body run as usual
    app.task(fresh.fn, name="fresh_checked", already_done=nothing_there)

    stalled = app.enqueue("convert", args=["d1"]).job
    plain = app.enqueue("fresh_checked", args=["d2"]).job
    asyncio.run(_run_until(app, lambda: all(
        app.client.job(j.id).status is Status.SUCCEEDED for j in (stalled, plain))))

    done = app.client.job(stalled.id)
    assert bodies == ["d1"]  # the body ran once
    assert (done.attempts, done.result) == (2, str(out / "d1.xml"))
    assert app.client.job_events(stalled.id)[-1].meta.get("skipped") == "already_done"
    assert app.client.job(plain.id).result == "d2"
    assert "skipped" not in app.client.job_events(plain.id)[-1].meta
    app.close()


def test_already_done_must_be_callable() -> None:
    with pytest.raises(ConfigError, match="already_done must be a function"):
        App("sqlite:///:memory:").task(lambda: None, name="t", already_done="yes")
