"""Waiting for a job's result from the enqueuing side: woken when the job
ends (not polled), the result returned or the job's error raised."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import pytest

from redrive import Actor, App, Client, MemoryStore, Permanent, ResultCancelled, ResultFailed, ResultTimeout, Settings
from redrive import client as client_module
from tests.apps.drain import app as drain_app
from tests.figures import record
from tests.integration.processes import WorkerProcess
from tests.integration.test_worker_in_process import _run_until


@pytest.mark.parametrize("waiters", [1, 3])
def test_a_result_wait_is_woken_by_the_jobs_ending(db_url: str, tmp_path, workers, waiters: int,
                                                    monkeypatch) -> None:
    """Not by its safety-net re-read: that is put a minute away here, so a
    wait that returns at all was woken by the store's word of the ending."""
    monkeypatch.setattr(client_module, "_RESULT_RECHECK_S", 60.0)
    # Given a worker in another process, and a job that takes a second
    workers.append(WorkerProcess(db_url, tmp_path, "--poll-interval", "0.2"))
    client = Client(drain_app.registry, settings=Settings.load(database_url=db_url))
    job = client.enqueue("sleep_then_record", kwargs={"key": "k", "seconds": 1.0}).job
    returns: list[float] = []
    visible: list[float] = []

    def wait() -> None:
        result = client.result(job.id, timeout=30)  # a ResultTimeout here: never woken
        returns.append(time.monotonic())
        assert result["key"] == "k"

    def watch() -> None:
        # The ending's commit, seen from outside: the job's finished_at is the
        # start of the worker's transaction, and a busy machine can take a
        # while from there to the commit, which no waiter can hear sooner.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and client.job(job.id).finished_at is None:
            time.sleep(0.01)
        visible.append(time.monotonic())

    # When some callers wait for its result
    threads = [threading.Thread(target=wait) for _ in range(waiters)] + [threading.Thread(target=watch)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(40)
    # Then each was woken by the ending, long before any re-read would have come
    assert len(returns) == waiters, "a waiter was not woken by the job's ending"
    lags = sorted(round(returned - visible[0], 3) for returned in returns)
    record(f"a result wait, {waiters} waiter(s), {db_url.split(':')[0]}",
           "seconds from the ending visible to the last waiter back", f"{lags[-1]:.3f}", "woken, not re-read")
    client.close()


def test_a_failed_job_raises_its_code_a_cancelled_one_says_so_and_a_wait_can_time_out() -> None:
    app = App(store=MemoryStore())

    @app.task
    def reject() -> None:
        raise Permanent("only PDF files are supported", code="NOT_PDF")

    failed = reject.enqueue().job
    asyncio.run(_run_until(app, lambda: app.client.job(failed.id).status.value == "failed"))
    with pytest.raises(ResultFailed, match=r"\[NOT_PDF\]: only PDF files are supported") as raised:
        app.result(failed.id, timeout=1)
    assert raised.value.error_code == "NOT_PDF" and raised.value.code == "JOB_FAILED"

    later = reject.options(delay=timedelta(hours=1)).enqueue().job
    started = time.monotonic()
    with pytest.raises(ResultTimeout, match=r"still scheduled after 0\.2 s"):
        app.result(later.id, timeout=0.2)
    assert time.monotonic() - started < 1
    threading.Timer(0.2, lambda: app.admin(Actor.operator("ops")).cancel(later.id)).start()
    with pytest.raises(ResultCancelled):
        asyncio.run(app.result_async(later.id, timeout=5))
