"""The review notification spec, checked against the running example:
idempotent job creation, versioned reruns, one email per (changelist,
recipient, version) with workers SIGKILLed at random, refused recipients
left failed for an operator, and both rows of the §8.2 failure matrix."""

from __future__ import annotations

import json
import random
import time

import pytest

from redrive.testing import wait_for
from tests.examples import BOTH_STORES
from tests.fakes.slack import slack_webhook
from tests.review_notify.conftest import Reviews

RECIPIENTS = ["ana@example.com", "ben@example.com", "chi@example.com"]


def _ask(client, key: str, changelist: str, version: int, recipients=RECIPIENTS):
    return client.post("/reviews", json={"idempotency_key": key, "changelist_id": changelist,
                                         "review_version": version, "recipients": recipients})


def test_a_duplicate_request_returns_the_existing_job_and_creates_nothing(reviews: Reviews) -> None:
    reviews.provider()
    api = reviews.service()
    first = _ask(api, "cl-100-review", "cl-100", 1)
    assert first.status_code == 201 and first.json()["duplicate"] is False
    again = _ask(api, "cl-100-review", "cl-100", 1)
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert again.json()["job_id"] == first.json()["job_id"]
    assert len(reviews.admin.jobs(task="notify_review")) == 1
    reused = _ask(api, "cl-100-review", "cl-100", 1, ["someone@example.com"])
    assert reused.status_code == 409 and reused.json()["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"

    reviews.worker()
    job_id = first.json()["job_id"]
    reviews.wait(job_id, "succeeded")
    done = _ask(api, "cl-100-review", "cl-100", 1).json()  # same version after success: the prior result
    assert done["duplicate"] is True and done["status"] == "succeeded"
    assert sorted(done["result"]["notified"]) == RECIPIENTS
    assert reviews.delivered() == {("Review of changelist cl-100 (v1)", r): 1 for r in RECIPIENTS}
    assert len(reviews.admin.jobs(task="notify_review")) == 1

    for body, where in [({"changelist_id": "x", "review_version": 1, "recipients": ["a@b.c"]}, "idempotency_key"),
                        ({"idempotency_key": "k", "changelist_id": "x", "review_version": 0,
                          "recipients": ["a@b.c"]}, "review_version")]:
        bad = api.post("/reviews", json=body)
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "INVALID_REQUEST"
        assert bad.json()["error"]["message"].startswith(where) and "\n" not in bad.json()["error"]["message"]


def test_a_v2_rerun_notifies_everyone_again_once(reviews: Reviews) -> None:
    reviews.provider()
    api = reviews.service()
    reviews.worker()
    v1 = _ask(api, "cl-200-review", "cl-200", 1).json()
    reviews.wait(v1["job_id"], "succeeded")
    v2 = _ask(api, "cl-200-review", "cl-200", 2)
    assert v2.status_code == 201 and v2.json()["job_id"] != v1["job_id"]  # a new logical attempt
    reviews.wait(v2.json()["job_id"], "succeeded")
    assert _ask(api, "cl-200-review", "cl-200", 2).json()["duplicate"] is True
    late = _ask(api, "cl-200-review", "cl-200", 1).json()  # a late v1 request: v2 superseded it
    assert late["duplicate"] is True and late["review_version"] == 2
    # Anything wrongly queued runs first: nothing is left waiting or running
    wait_for(lambda: not any(reviews.admin.jobs(status=status, limit=1).items for status in ("queued", "running")),
             timeout=30, what="every job ended")
    assert reviews.delivered() == {**{("Review of changelist cl-200 (v1)", r): 1 for r in RECIPIENTS},
                                   **{("Review of changelist cl-200 (v2)", r): 1 for r in RECIPIENTS}}
    assert len(reviews.sends()) == 6


def test_a_refused_recipient_marks_its_row_failed_for_an_operator(reviews: Reviews) -> None:
    reviews.provider()
    api = reviews.service()
    reviews.worker()
    reviews.block("ben@example.com")
    job_id = _ask(api, "cl-300-review", "cl-300", 1,
                  ["ana@example.com", "ben@example.com", "typo@invalid.example"]).json()["job_id"]
    job = reviews.wait(job_id, "failed")
    assert job.attempts == 1  # refusals are not retried
    rows = {json.loads(r.key)[1]: r for r in reviews.admin.outbox()}
    assert rows["ana@example.com"].status == "sent" and rows["ana@example.com"].notified_at is not None
    assert (rows["ben@example.com"].status, rows["ben@example.com"].error_code) == ("failed", "POLICY_REJECTED")
    assert (rows["typo@invalid.example"].status, rows["typo@invalid.example"].error_code) == (
        "failed", "INVALID_RECIPIENT")
    letter, = reviews.admin.dead_letters(task="notify_review")
    assert letter.error_code in ("POLICY_REJECTED", "INVALID_RECIPIENT")

    # The operator clears ben's block; the caller's typo stays: a replay sends to ben only.
    reviews.block("ben@example.com", unblock=True)
    reviews.admin.replay([letter.id])
    wait_for(lambda: len(reviews.admin.dead_letters(task="notify_review")) == 2,
             timeout=30, what="the replay failing on the typo")
    assert reviews.admin.job(job_id).status.value == "failed"
    assert reviews.delivered() == {("Review of changelist cl-300 (v1)", "ana@example.com"): 1,
                                   ("Review of changelist cl-300 (v1)", "ben@example.com"): 1}
    assert reviews.admin.dead_letters(task="notify_review")[0].error_code == "INVALID_RECIPIENT"


@BOTH_STORES
def test_email_sent_but_db_write_failed_is_reconciled_without_resending(reviews: Reviews) -> None:
    """§8.2, first row: the provider took the email, and the worker died
    before recording it. The retry asks the provider first and backfills."""
    reviews.provider()
    api = reviews.service()
    reviews.mode("hold", hold_s=60)  # the first send is taken, its answer held
    doomed = reviews.worker(WORKER_LEASE_TTL_SEC="3")
    job_id = _ask(api, "cl-400-review", "cl-400", 1).json()["job_id"]
    wait_for(lambda: reviews.messages(), timeout=30, what="the held send")
    reviews.kill(doomed)
    held, = reviews.messages()
    row = next(r for r in reviews.admin.outbox() if json.loads(r.key)[1] == held["to"])
    assert row.status == "sending" and row.notified_at is None  # the record never happened

    reviews.worker(WORKER_LEASE_TTL_SEC="3")  # a short lease: it looks for expired ones every 1-1.5 s
    reviews.wait(job_id, "succeeded")
    row = next(r for r in reviews.admin.outbox() if json.loads(r.key)[1] == held["to"])
    assert (row.status, row.provider_id, row.reconciliations) == ("sent", held["id"], 1)
    assert row.notified_at is not None
    assert reviews.delivered() == {("Review of changelist cl-400 (v1)", r): 1 for r in RECIPIENTS}
    assert len(reviews.sends()) == 3  # never resent


def _mark_sent_without_evidence(reviews: Reviews, key: list) -> None:
    """The ordering contract broken by hand: notified_at set, no provider id (a
    deployment that marked rows sent before the provider confirmed)."""
    canonical = json.dumps(key, sort_keys=True, separators=(",", ":"))
    url = reviews.env["DATABASE_URL"]
    if url.startswith("sqlite:///"):
        import sqlite3

        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            changed = db.execute("UPDATE redrive_outbox SET status = 'sent', notified_at = ?, provider_id = NULL "
                                 "WHERE key = ?", (time.time(), canonical)).rowcount
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as db:
            changed = db.execute("UPDATE redrive_outbox SET status = 'sent', notified_at = now(), provider_id = NULL "
                                 "WHERE key = %s", (canonical,)).rowcount
    assert changed == 1


@BOTH_STORES
def test_a_row_marked_sent_before_the_send_is_repaired_and_alerts(reviews: Reviews) -> None:
    """§8.2, second row: the row says sent, the provider has nothing. The
    replay reconciles first, finds nothing, clears the markers, sends, and
    operators are told the ordering contract was broken."""
    reviews.env["MAX_ATTEMPTS"] = "1"  # the outage fails the job at once, for an operator to replay
    reviews.provider()
    api = reviews.service()
    reviews.mode("down")
    with slack_webhook() as slack:
        reviews.worker(REDRIVE_SLACK_WEBHOOK_URL=slack.url, REDRIVE_NOTIFY_WINDOW="1s")
        job_id = _ask(api, "cl-500-review", "cl-500", 1).json()["job_id"]
        reviews.wait(job_id, "failed")
        assert len(reviews.sends()) == 3 and not reviews.messages()
        _mark_sent_without_evidence(reviews, ["cl-500", "ben@example.com", 1])

        reviews.mode("ok")
        letter, = reviews.admin.dead_letters(task="notify_review")
        reviews.admin.replay([letter.id])
        reviews.wait(job_id, "succeeded")
        wait_for(lambda: any("marked sent without the provider" in m for m in slack.messages),
                 timeout=30, what="the alert")
    row = next(r for r in reviews.admin.outbox() if json.loads(r.key)[1] == "ben@example.com")
    assert row.status == "sent" and row.provider_id and row.reconciliations == 1
    assert reviews.delivered() == {("Review of changelist cl-500 (v1)", r): 1 for r in RECIPIENTS}


@pytest.mark.slow
@pytest.mark.parametrize("example_db", ["postgres"], indirect=True)
def test_a_thousand_reviews_with_workers_killed_at_random_deliver_each_email_once(reviews: Reviews) -> None:
    reviews.provider()
    api = reviews.service()
    for n in range(1000):
        assert _ask(api, f"cl-{n}-review", f"cl-{n}", 1).status_code == 201
    lease = {"WORKER_LEASE_TTL_SEC": "3"}
    workers = [reviews.worker(**lease) for _ in range(3)]
    rng, kills, deadline = random.Random(4), 0, time.monotonic() + 240
    while reviews.admin.jobs(task="notify_review", status="queued", limit=1) or \
            reviews.admin.jobs(task="notify_review", status="running", limit=1):
        assert time.monotonic() < deadline, "the reviews did not finish in 4 minutes"
        time.sleep(rng.uniform(0.3, 1.2))
        if kills < 12:
            victim = workers.pop(rng.randrange(len(workers)))
            reviews.kill(victim)
            kills += 1
            workers.append(reviews.worker(**lease))
    assert kills >= 5
    failed = reviews.admin.jobs(task="notify_review", status="failed")
    assert not failed, [(j.error_code, j.error_message, j.attempts) for j in failed]
    delivered = reviews.delivered()
    assert len(delivered) == 3000 and set(delivered.values()) == {1}
    # A send may be repeated when a worker died (or stalled past its lease)
    # between its send and its record, and the next one found no trace at the
    # provider yet: every repeat carried the same token, so the provider took
    # it once. That token, derived from the key, is what makes it safe.
    tokens: dict[tuple[str, str], set[str]] = {}
    for send in reviews.sends():
        tokens.setdefault((send["subject"], send["to"]), set()).add(send["key"])
    assert set(tokens) == set(delivered), set(tokens) ^ set(delivered)
    assert all(len(found) == 1 for found in tokens.values())
