"""Seed 001's pipeline on real worker processes, SQLite and PostgreSQL: stage
budgets, resumption, dead letters with redaction, replay, escalation and manual
retry, against a local upstream that fails on command."""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import pairwise

import pytest

from redrive import Actor, App, Status
from redrive.cli import load_app
from redrive.testing import wait_for
from redrive.views import dead_letter_view
from tests.fakes.upstream import serving
from tests.integration.processes import REPO, WorkerProcess, executions

PIPELINE = "tests.apps.pipeline:app"
SECRET = "sk_live_abcdefghijklmnop"

OPERATOR = Actor.operator("test")


def cli(url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "REDRIVE_DATABASE_URL": url, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "redrive", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


def settled(app: App, *job_ids, statuses=(Status.SUCCEEDED, Status.FAILED)):
    return lambda: all(app.client.job(i).status in statuses for i in job_ids)


def letters_of(app: App, job_id) -> list:
    return sorted((d for d in app.admin(OPERATOR).dead_letters() if d.job_id == job_id), key=lambda d: d.id)


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_a_pipeline_retries_per_stage_dead_letters_and_replays(db_url, tmp_path, workers) -> None:
    app = load_app(PIPELINE, db_url)
    with serving() as upstream:
        upstream.script("/llm/a", 503, 503)  # then 200
        upstream.standing("/llm/b", 503)
        upstream.standing("/llm/c", 401)
        ids = {key: app.enqueue("criticize", kwargs={"key": key, "api_key": SECRET},
                                owner="alice").job.id for key in "abc"}
        env = {"REDRIVE_TEST_UPSTREAM": upstream.url}
        for _ in range(2):
            workers.append(WorkerProcess(db_url, tmp_path, "--poll-interval", "0.2",
                                         app=PIPELINE, env=env))
        wait_for(settled(app, *ids.values()), timeout=45)
        runs = executions(tmp_path)

        # a: stage 2 failed twice then succeeded; stage 1 ran once
        a = app.client.job(ids["a"])
        assert a.status is Status.SUCCEEDED and a.result == {"verdict": "a reads well"}
        assert a.stage_attempts == {"fetch": 1, "llm": 3, "notify": 1}
        assert (runs["a:fetch"], runs["a:llm"], runs["a:notify"]) == (1, 3, 1)
        # never retried before its run_at: each call waits out the 1 s delay
        assert all(later - earlier >= 0.99 for earlier, later in pairwise(upstream.calls("/llm/a")))
        retries = [e for e in app.client.job_events(a.id) if e.from_status is Status.RUNNING
                   and e.to_status is Status.QUEUED]
        assert [(e.attempt, e.meta["stage"], e.meta["error_code"], e.meta["upstream_status"],
                 e.meta["delay_ms"]) for e in retries] == [
            (1, "llm", "UPSTREAM_5XX", 503, 1000), (2, "llm", "UPSTREAM_5XX", 503, 1000)]
        assert all(e.meta["duration_ms"] >= 0 for e in retries)

        # b: llm spent its budget of 3; fetch kept its count, notify never ran
        b = app.client.job(ids["b"])
        assert (b.status, b.error_code, b.stage) == (Status.FAILED, "UPSTREAM_5XX", "llm")
        (letter_b,) = letters_of(app, b.id)
        assert (letter_b.stage, letter_b.error_class, letter_b.retryable) == ("llm", "UPSTREAM_5XX", True)
        assert letter_b.stage_attempts == {"fetch": 1, "llm": 3}
        assert (runs["b:fetch"], runs["b:llm"], runs["b:notify"]) == (1, 3, 0)
        assert letter_b.context["request_id"] == "req-b"
        assert letter_b.context["api_key"] == "[REDACTED]"
        assert letter_b.context["upstream_status"] == 503
        assert letter_b.context["exception"] == "httpx.HTTPStatusError"
        assert "HTTPStatusError" in letter_b.last_stack and "[EMAIL]" in letter_b.last_stack
        assert letter_b.first_failure_at < letter_b.last_failure_at
        failed_event = app.client.job_events(b.id)[-1]
        assert failed_event.meta["dead_letter_id"] == letter_b.id

        # c: a non-retryable answer dead-letters at once
        c = app.client.job(ids["c"])
        (letter_c,) = letters_of(app, c.id)
        assert (letter_c.error_class, letter_c.stage_attempts, letter_c.escalated) == (
            "AUTH_DENIED", {"fetch": 1, "llm": 1}, False)

        # nothing secret was stored or shown
        shown = cli(db_url, "dead", "show", str(letter_b.id)).stdout + cli(db_url, "jobs", "show", str(b.id)).stdout
        for letter in (letter_b, letter_c):
            stored = str(dead_letter_view(letter))
            assert SECRET not in stored and "alice@example.com" not in stored
        assert SECRET not in shown and "alice@example.com" not in shown and "[REDACTED]" in shown

        # The operator fixes b's upstream, notes it, and replays b and c
        upstream.standing("/llm/b", 200)
        assert cli(db_url, "dead", "note", str(letter_b.id), "LLM quota raised").returncode == 0
        replayed = cli(db_url, "dead", "replay", str(letter_b.id), str(letter_c.id), "--by", "ops")
        assert replayed.returncode == 0, replayed.stderr
        assert replayed.stdout.count("queued at llm") == 2
        wait_for(lambda: settled(app, b.id, c.id)() and len(letters_of(app, c.id)) == 2, timeout=30)
        runs = executions(tmp_path)

        # b resumed at llm: fetch did not run again
        b = app.client.job(ids["b"])
        assert b.status is Status.SUCCEEDED
        assert (runs["b:fetch"], runs["b:llm"], runs["b:notify"]) == (1, 4, 1)
        assert b.stage_attempts == {"fetch": 1, "llm": 1, "notify": 1}
        letter_b = app.admin(OPERATOR).dead_letter(letter_b.id)
        assert (letter_b.state, letter_b.replayed_by, letter_b.replay_from) == ("replayed", "ops", "stage")
        assert [n["text"] for n in letter_b.notes] == ["LLM quota raised"]
        # A second replay of the same letter does nothing
        (again,) = app.admin(OPERATOR).replay([letter_b.id])
        assert not again.replayed and app.client.job(b.id).status is Status.SUCCEEDED

        # c failed again with the same non-retryable class: escalated
        first_c, second_c = letters_of(app, c.id)
        assert second_c.escalated and second_c.previous_id == first_c.id
        assert first_c.state == "replayed" and runs["c:fetch"] == 1
        listed = cli(db_url, "dead", "list", "--state", "escalated").stdout
        assert str(second_c.id) in listed and "AUTH_DENIED" in listed

        # Manual retry: only the owner (or an operator)
        refused = cli(db_url, "jobs", "retry", str(c.id), "--owner", "mallory")
        assert refused.returncode == 2 and "[FORBIDDEN]" in refused.stderr
        retried = cli(db_url, "jobs", "retry", str(c.id), "--owner", "alice")
        assert retried.returncode == 0, retried.stderr
        wait_for(lambda: len(letters_of(app, c.id)) == 3, timeout=30)
        c = app.client.job(ids["c"])
        assert c.status is Status.FAILED and c.manual_retry_count == 1
        assert letters_of(app, c.id)[-1].escalated
        reasons = [e.meta.get("reason") for e in app.client.job_events(c.id) if e.from_status is Status.FAILED]
        assert reasons == ["replay", "manual_retry"]

    for worker in workers:
        assert worker.stop() == 0
        assert "alice@example.com" not in worker.log and SECRET not in worker.log
        assert "Traceback" not in worker.log
    app.close()


@pytest.mark.parametrize("bad", [["nope"], ["0"], ["99999"]])
def test_replaying_what_does_not_exist_is_a_clean_error(sqlite_url: str, bad: list[str]) -> None:
    App(sqlite_url).store.close()  # the database exists, the letters do not
    result = cli(sqlite_url, "dead", "replay", *bad)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("redrive: error [DEAD_LETTER_NOT_FOUND]: ")
