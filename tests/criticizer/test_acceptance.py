"""The criticizer's §8, checked against the running example: the failure
table through the pipeline, per-stage budgets, Retry-After, the dead
letter's payload and its safety constraints, and the operator workflow of
§8.5 through redrive's CLI and dashboard."""

from __future__ import annotations

import json
import sys

import pytest

from redrive.testing import wait_for
from tests.criticizer.conftest import OPERATOR_TOKEN, TOKENS, Criticizer, csrf
from tests.examples import BOTH_STORES

# §8.1, row by row: (category, service, answer, retryable, error_class)
TABLE = [
    ("network transient: socket timeout", "llm", "timeout", True, "NETWORK_TIMEOUT"),
    ("network transient: TCP reset", "source", "reset", True, "NETWORK_ERROR"),
    ("network transient: 502", "llm", "502", True, "UPSTREAM_UNAVAILABLE"),
    ("network transient: 503", "source", "503", True, "UPSTREAM_UNAVAILABLE"),
    ("network transient: 504", "webhook", "504", True, "UPSTREAM_UNAVAILABLE"),
    ("rate limiting: HTTP 429", "llm", "429", True, "RATE_LIMITED"),
    ("rate limiting: provider rate_limit_exceeded", "llm", "rate_limit_exceeded", True, "RATE_LIMITED"),
    ("rate limiting: temporary quota window", "llm", "quota", True, "RATE_LIMITED"),
    ("upstream internal: LLM internal_error", "llm", "internal_error", True, "UPSTREAM_5XX"),
    ("upstream internal: webhook 5xx", "webhook", "500", True, "UPSTREAM_5XX"),
    ("optimistic-lock conflict", "webhook", "409", True, "CONFLICT"),
    ("validation: missing required fields", "source", "missing_fields", False, "SCHEMA_INVALID"),
    ("validation: malformed JSON payload", "source", "malformed", False, "SCHEMA_INVALID"),
    ("validation: schema mismatch", "llm", "schema", False, "SCHEMA_INVALID"),
    ("auth: invalid API key", "llm", "401", False, "AUTH_DENIED"),
    ("auth: expired token", "source", "token_expired", False, "AUTH_DENIED"),
    ("auth: permission denied", "source", "403", False, "AUTH_DENIED"),
    ("not found: immutable input", "source", "404", False, "NOT_FOUND"),
    ("not found: deleted destination channel", "webhook", "channel_deleted", False, "NOT_FOUND"),
    ("content policy: moderation block", "llm", "policy", False, "POLICY_REJECTED"),
    ("hard business rule: explicit deny", "webhook", "policy_denied", False, "POLICY_REJECTED"),
]
STAGE_OF = {"source": "fetch", "llm": "llm", "webhook": "notify"}


def test_every_row_of_the_failure_table_through_the_pipeline(criticizer: Criticizer) -> None:
    criticizer.services()
    criticizer.worker(CALL_TIMEOUT_S="0.5")
    jobs = []
    for n, (_, service, answer, retryable, _) in enumerate(TABLE):
        key = f"row-{n}"
        if retryable:
            criticizer.script(service, key, answer, retry_after=0, hang_s=1.5)
        else:
            criticizer.script(service, key, always=answer, retry_after=0, hang_s=1.5)
        jobs.append(criticizer.submit(key))
    for n, ((row, service, _, retryable, code), job_id) in enumerate(zip(TABLE, jobs, strict=True)):
        job = criticizer.wait(job_id, "succeeded", "failed")
        stage = STAGE_OF[service]
        failed_with = [e.meta.get("error_code") for e in criticizer.admin.job_events(job_id)
                       if e.meta.get("error_code")]
        assert failed_with and failed_with[0] == code, (row, failed_with)
        if retryable:
            assert job.status.value == "succeeded", row
            assert job.stage_attempts[stage] == 2, (row, job.stage_attempts)
            assert len(criticizer.messages(f"row-{n}")) == 1, row
        else:
            assert job.status.value == "failed", row
            assert job.stage_attempts[stage] == 1, (row, job.stage_attempts)  # not retried
            letter, = criticizer.admin.dead_letters(error_class=code, stage=stage, task="criticize")[:1] or [None]
            assert letter is not None and letter.error_class == code and not letter.retryable, row


def test_llm_failing_twice_then_succeeding_calls_fetch_once(criticizer: Criticizer) -> None:
    criticizer.services()
    criticizer.worker()
    criticizer.script("llm", "c1", "503", "internal_error")
    job = criticizer.wait(criticizer.submit("c1"), "succeeded")
    assert len(criticizer.calls("source", "c1")) == 1
    assert len(criticizer.calls("llm", "c1")) == 3
    assert job.stage_attempts == {"fetch": 1, "llm": 3, "notify": 1}
    assert len(criticizer.messages("c1")) == 1


def test_retry_after_is_honoured(criticizer: Criticizer) -> None:
    criticizer.services()
    criticizer.worker()
    criticizer.script("llm", "c2", "429", retry_after=2)  # backoff alone would wait at most 0.05 s
    criticizer.wait(criticizer.submit("c2"), "succeeded")
    first, second = (c["at"] for c in criticizer.calls("llm", "c2"))
    assert second - first >= 2.0


@BOTH_STORES
@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_llm_exhausting_its_budget_dead_letters_at_llm_and_a_replay_resumes_there(criticizer: Criticizer) -> None:
    criticizer.services()
    criticizer.worker()
    criticizer.script("llm", "c3", always="503")
    job_id = criticizer.submit("c3", requested_by="dana@example.com")
    job = criticizer.wait(job_id, "failed")
    assert job.stage_attempts == {"fetch": 1, "llm": 5}  # notify's budget untouched, fetch's spent once
    assert len(criticizer.calls("source", "c3")) == 1 and len(criticizer.calls("llm", "c3")) == 5
    assert not criticizer.calls("webhook", "c3")

    # Triage (§8.5 step 1) from the CLI: the dead letter's §8.4 payload.
    letter, = criticizer.admin.dead_letters(task="criticize")
    listed = criticizer.redrive("dead", "list", "--stage", "llm").stdout.splitlines()
    assert [line.split()[:5] for line in listed[1:]] == [[str(letter.id), "criticize", "llm",
                                                          "UPSTREAM_UNAVAILABLE", "open"]]
    shown = criticizer.redrive("dead", "show", str(letter.id)).stdout
    for field in (str(job_id), "UPSTREAM_UNAVAILABLE", "llm_status", "diff_sha256", "HTTPStatusError"):
        assert field in shown, (field, shown)
    assert letter.error_class == "UPSTREAM_UNAVAILABLE" and letter.stage == "llm"
    assert letter.last_stack and "HTTPStatusError" in letter.last_stack
    assert letter.first_failure_at <= letter.last_failure_at
    assert letter.context["llm_status"] == 503 and letter.context["llm_request_id"].startswith("req-")
    assert letter.context["change_id"] == "c3" and len(letter.context["diff_sha256"]) == 16
    assert letter.stage_attempts == {"fetch": 1, "llm": 5}

    # Remediate, record the evidence, replay from the failed stage.
    criticizer.script("llm", "c3")  # the provider recovered
    criticizer.redrive("dead", "note", str(letter.id), "LLM provider incident INC-42 over; verified recovery")
    criticizer.redrive("dead", "replay", str(letter.id))
    job = criticizer.wait(job_id, "succeeded")
    assert len(criticizer.calls("source", "c3")) == 1  # fetch's saved output was used: resumed at llm
    assert len(criticizer.calls("llm", "c3")) == 6
    assert len(criticizer.messages("c3")) == 1
    replayed = criticizer.admin.dead_letter(letter.id)
    assert replayed.replay_from == "stage" and replayed.notes[0]["text"].startswith("LLM provider incident")


def test_the_operator_workflow_in_the_dashboard_escalates_a_repeat_and_a_fix_completes(
        criticizer: Criticizer) -> None:
    criticizer.services()
    criticizer.worker()
    criticizer.script("source", "c4", always="401")  # a revoked credential
    job_id = criticizer.submit("c4")
    criticizer.wait(job_id, "failed")
    ops = criticizer.dashboard()

    # Triage: the dead letters filtered by error class, then the letter itself.
    letter, = criticizer.admin.dead_letters(task="criticize")
    assert f'/dead-letters/{letter.id}"' in ops.get("/dead-letters", params={"error_class": "AUTH_DENIED"}).text
    assert f'/dead-letters/{letter.id}"' not in ops.get("/dead-letters", params={"error_class": "NOT_FOUND"}).text
    detail = ops.get(f"/dead-letters/{letter.id}").text
    assert "AUTH_DENIED" in detail and "fetch" in detail

    # A replay before any remediation fails the same way: escalated.
    assert ops.post("/dead-letters/replay", data={"csrf": csrf(detail), "ids": str(letter.id), "start": "0"}
                    ).status_code == 200
    criticizer.wait(job_id, "failed")
    wait_for(lambda: any(x.escalated for x in criticizer.admin.dead_letters(task="criticize")),
             timeout=30, what="the escalation")
    escalated = next(x for x in criticizer.admin.dead_letters(task="criticize") if x.escalated)
    assert escalated.previous_id == letter.id and escalated.error_class == "AUTH_DENIED"
    assert "escalated" in ops.get("/dead-letters", params={"state": "escalated"}).text

    # Remediate (the credential is fixed), note it, replay from the start.
    criticizer.script("source", "c4")
    detail = ops.get(f"/dead-letters/{escalated.id}").text
    ops.post(f"/dead-letters/{escalated.id}/notes", data={"csrf": csrf(detail), "text": "source token rotated"})
    ops.post("/dead-letters/replay", data={"csrf": csrf(detail), "ids": str(escalated.id), "start": "1"})
    job = criticizer.wait(job_id, "succeeded")
    assert job.stage_attempts["notify"] == 1
    assert len(criticizer.messages("c4")) == 1
    assert "source token rotated" in ops.get(f"/dead-letters/{escalated.id}").text


def test_an_escalation_pages_the_operator_through_redrives_worker_and_its_slack_channel(
        criticizer: Criticizer, tmp_path) -> None:
    """§8.1's "page operator", with the README's configuration: the worker
    run as ``redrive worker criticizer.pipeline:make_app()`` (an app a
    function builds) with a Slack webhook in the environment. A replay that
    fails again the same way reaches the (local, fake) Slack channel."""
    from tests.fakes.slack import slack_webhook

    with slack_webhook() as slack:
        criticizer.services()
        criticizer.start("redrive-worker", "worker", "criticizer.pipeline:make_app()",
                         command=[sys.executable, "-m", "redrive"],
                         env={"REDRIVE_SLACK_WEBHOOK_URL": slack.url})
        criticizer.script("source", "c6", always="401")
        job_id = criticizer.submit("c6")
        criticizer.wait(job_id, "failed")
        letter, = criticizer.admin.dead_letters(task="criticize")
        criticizer.admin.replay([letter.id])
        wait_for(lambda: any("escalated" in m.lower() for m in slack.messages), timeout=30,
                 what="the escalation on Slack")
        page = next(m for m in slack.messages if "escalated" in m.lower())
        assert "criticize" in page and "AUTH_DENIED" in page, page
        assert not any(token in m for m in slack.messages for token in TOKENS.values())


SECRET_DIFF = ('+OPENAI_API_KEY = "sk-proj-PlantedInTheDiff0123456789abcdefghij"\n'
               "+# Codename BLUE-HERON-7741: the merger with Initech closes Friday\n"
               "+# ask jane.doe@example.com for the numbers\n")
NEVER_SHOWN = ["sk-proj-PlantedInTheDiff", "BLUE-HERON-7741", "merger with Initech", "jane.doe@example.com",
               "dana@example.com", *TOKENS.values()]


def test_no_planted_secret_reaches_the_dead_letter_the_logs_or_the_dashboard(criticizer: Criticizer) -> None:
    criticizer.services()
    criticizer.worker()
    criticizer.change("c5", "Add the merger numbers", SECRET_DIFF)
    criticizer.script("llm", "c5", always="echo")  # a 400 that quotes the prompt back
    job_id = criticizer.submit("c5", requested_by="dana@example.com")
    criticizer.wait(job_id, "failed")
    letter, = criticizer.admin.dead_letters(task="criticize")
    assert letter.error_class == "VALIDATION_FAILED" and letter.stage == "llm"
    ops = criticizer.dashboard()
    seen = {
        "the dead letter": json.dumps([letter.error_class, letter.error_message, letter.last_stack, letter.context], default=str),
        "the CLI": criticizer.redrive("dead", "show", str(letter.id)).stdout,
        "the worker's log": criticizer.log("worker"),
        "the dead letters page": ops.get("/dead-letters").text,
        "the dead letter page": ops.get(f"/dead-letters/{letter.id}").text,
        "the job page": ops.get(f"/jobs/{job_id}").text,
        "the API": "".join(ops.get(path, headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}).text
                           for path in (f"/api/v1/jobs/{job_id}", f"/api/v1/dead-letters/{letter.id}")),
    }
    unread = [where for where, text in seen.items() if "VALIDATION_FAILED" not in text and str(job_id) not in text]
    assert not unread  # each place was read, and holds the failure
    for where, text in seen.items():
        for secret in NEVER_SHOWN:
            assert secret not in text, (secret, where)
