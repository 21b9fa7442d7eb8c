"""Seed 002 §4 on real worker processes: one breaker shared by every worker,
in front of a local gateway that answers 503 on command."""

from __future__ import annotations

import time

import pytest

from redrive import Actor, App, JobRequest, Status
from redrive.cli import load_app
from redrive.testing import wait_for
from tests.fakes.upstream import Upstream, serving
from tests.integration.processes import WorkerProcess, executions

GATEWAY = "tests.apps.gateway:app"
OPERATOR = Actor.operator("test")


def start(workers: list, url: str, tmp_path, upstream: Upstream, count: int) -> None:
    for _ in range(count):
        workers.append(WorkerProcess(url, tmp_path, "--poll-interval", "0.2", "-c", "4",
                                     app=GATEWAY, env={"REDRIVE_TEST_UPSTREAM": upstream.url}))


def state(app: App, name: str) -> str:
    return app.admin(OPERATOR).breakers()[name].state


def hold_queue_scenario(url: str, tmp_path, workers: list, processes: int) -> None:
    app = load_app(GATEWAY, url)
    with serving() as upstream:
        upstream.standing("/convert/", 503)
        upstream.standing("/health", 503)
        start(workers, url, tmp_path, upstream, processes)
        ids = [r.job.id for r in app.enqueue_many(
            [JobRequest("convert", args=[f"k{n}"]) for n in range(40)])]

        # The gateway fails: the breaker opens for every worker
        wait_for(lambda: state(app, "gateway") == "open", timeout=30)
        # Calls admitted before it opened still go on: each is a job running.
        # Once none runs, every such call has ended, and the gateway must hear only probes.
        wait_for(lambda: not app.client.jobs(status=Status.RUNNING, limit=100).items, timeout=30, every=0.05,
                 what="the calls admitted before the breaker opened to end")
        quiet_from = time.monotonic()
        before = {i: app.client.job(i).attempts for i in ids}
        time.sleep(3.0)  # a window longer than the policy's wait: the probe decides, not the wait

        # While open: only probes reach the gateway, no attempt is spent, jobs wait queued
        assert upstream.calls("/convert/", since=quiet_from) == []
        probes = upstream.calls("/health", since=quiet_from)
        assert 1 <= len(probes) <= 3.0 / 0.5 + 2  # one worker probes per interval
        assert {i: app.client.job(i).attempts for i in ids} == before
        assert all(app.client.job(i).status in (Status.QUEUED, Status.SCHEDULED) for i in ids)
        held = [e for i in ids for e in app.client.job_events(i) if e.meta.get("reason") == "breaker_open"]
        assert all(e.meta["dependency"] == "gateway" and e.to_status is Status.QUEUED for e in held)

        # The gateway recovers: probe, half-open trial, closed; the backlog drains
        upstream.standing("/convert/", 200)
        upstream.standing("/health", 200)
        wait_for(lambda: all(app.client.job(i).status is Status.SUCCEEDED for i in ids), timeout=60)
        runs = executions(tmp_path)
        assert {f"k{n}" for n in range(40)} == set(runs) and set(runs.values()) == {1}
        changes = [(e.from_state, e.to_state) for e in app.store.breaker_events_list(name="gateway")]
        assert changes[:3] == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]
        # (open through the whole window the test held, and more)
        assert state(app, "gateway") == "closed" and app.admin(OPERATOR).breakers()["gateway"].seconds_open >= 3.0
    for worker in workers:
        assert worker.stop() == 0
        assert "Traceback" not in worker.log
    logs = "".join(w.log for w in workers)
    assert "breaker gateway: closed -> open" in logs
    assert "breaker gateway: open -> half_open (health probe passed)" in logs
    app.close()


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_hold_queue_on_postgres_with_four_workers(pg_url, tmp_path, workers) -> None:
    hold_queue_scenario(pg_url, tmp_path, workers, processes=4)


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_hold_queue_on_sqlite_with_two_workers(sqlite_url, tmp_path, workers) -> None:
    hold_queue_scenario(sqlite_url, tmp_path, workers, processes=2)


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_fail_fast_fails_with_the_mapped_code(pg_url, tmp_path, workers) -> None:
    app = load_app(GATEWAY, pg_url)
    with serving() as upstream:
        upstream.standing("/convert_ff/", 503)
        start(workers, pg_url, tmp_path, upstream, 2)
        ids = [app.enqueue("convert_fast", args=[f"f{n}"]).job.id for n in range(20)]
        wait_for(lambda: all(app.client.job(i).status is Status.FAILED for i in ids), timeout=60)
        jobs = [app.client.job(i) for i in ids]
        assert {j.error_code for j in jobs} == {"UPSTREAM_5XX"}
        fast = [j for j in jobs if "circuit open" in j.error_message]
        assert fast, "no job was failed by the open breaker"
        for job in fast:
            # UPSTREAM_5XX is retryable: fail-fast spent attempts by the task's
            # policy, and its dispatches that failed fast never reached the gateway
            assert job.attempts == 20
            assert len(upstream.calls(f"/convert_ff/{job.args[0]}")) <= job.attempts - 1
        assert state(app, "gateway_ff") == "open"
        letters = {d.job_id: d for d in app.admin(OPERATOR).dead_letters(limit=100)}
        assert all(letters[j.id].context.get("dependency") == "gateway_ff" for j in fast)
    for worker in workers:
        assert worker.stop() == 0
    app.close()


@pytest.mark.parametrize("declare", [
    lambda app: app.task(lambda: None, name="t1", dependencies=["nope"]),
    lambda app: app.admin(OPERATOR).open_breaker("nope"),
])
def test_an_unknown_dependency_is_refused_at_once(sqlite_url, declare) -> None:
    from redrive import UnknownDependency

    app = load_app(GATEWAY, sqlite_url)
    with pytest.raises(UnknownDependency, match=r"no dependency named 'nope'.*gateway"):
        declare(app)
    app.close()
