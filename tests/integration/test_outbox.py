"""The outbox in a worker of this process, over a real SQLite file or
PostgreSQL, against the local mail provider: send-then-mark, reconciliation
before any resend, permanent failures left for an operator, versioned reruns."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest

from redrive import Actor, App, ConfigError, Intent, LeaseLost, OutboxStatus, Status, current_job, deliver
from redrive.core.ids import canonical, outbox_token
from redrive.core.transitions import Requeue
from tests.apps.notify import email, notify_review
from tests.fakes import mail
from tests.integration.test_worker_in_process import _run_until

pytestmark = pytest.mark.pgbouncer  # the db_url tests run through PgBouncer in transaction mode too

OPERATOR = Actor.operator("test")
TEAM = ["ann@example.com", "bob@example.com", "cy@example.com"]


@pytest.fixture
def provider(monkeypatch) -> Iterator[mail.MailProvider]:
    with mail.serving() as provider:
        monkeypatch.setenv("REDRIVE_TEST_PROVIDER", provider.url)
        monkeypatch.delenv("REDRIVE_TEST_CRASH_AT", raising=False)
        yield provider


@pytest.fixture
def app(db_url: str) -> Iterator[App]:
    app = App(db_url)
    app.task(notify_review.fn, name="notify_review", max_attempts=4, backoff=notify_review.backoff)
    yield app
    app.close()


def _run(app: App, *job_ids) -> None:
    finished = (Status.SUCCEEDED, Status.FAILED)
    asyncio.run(_run_until(app, lambda: all(app.client.job(i).status in finished for i in job_ids)))


def _token(changelist: str, recipient: str, version: int) -> str:
    return outbox_token((changelist, recipient, version))


def test_each_recipient_is_sent_once_and_recorded_with_the_providers_id(app: App, provider) -> None:
    job = app.enqueue("notify_review", kwargs={"changelist": "cl-1", "version": 3, "recipients": TEAM}).job
    _run(app, job.id)
    assert app.client.job(job.id).result == {r: "sent" for r in TEAM}
    rows = app.admin(OPERATOR).outbox(job_id=job.id)
    assert {r.status for r in rows} == {OutboxStatus.SENT}
    for row in rows:
        assert row.notified_at is not None and row.provider_id == provider.delivered[row.token]["id"]
    assert all(provider.posts[_token("cl-1", r, 3)] == 1 for r in TEAM)

    # The same version again (a duplicate request) sends nothing; a new version sends anew
    again = app.enqueue("notify_review", kwargs={"changelist": "cl-1", "version": 3, "recipients": TEAM}).job
    rerun = app.enqueue("notify_review", kwargs={"changelist": "cl-1", "version": 4, "recipients": TEAM}).job
    _run(app, again.id, rerun.id)
    assert app.client.job(again.id).result == {r: "already_sent" for r in TEAM}
    assert app.client.job(rerun.id).result == {r: "sent" for r in TEAM}
    assert len(provider.delivered) == 6 and sum(provider.posts.values()) == 6


def test_a_send_that_failed_in_flight_is_looked_up_before_it_is_sent_again(app: App, provider) -> None:
    provider.fail_next(1)  # the first send answers 503
    job = app.enqueue("notify_review", kwargs={"changelist": "cl-2", "version": 1, "recipients": TEAM[:1]}).job
    _run(app, job.id)
    done = app.client.job(job.id)
    assert (done.status, done.attempts, done.last_error_code) == (Status.SUCCEEDED, 2, "UPSTREAM_5XX")
    token = _token("cl-2", TEAM[0], 1)
    # The retry found the row "sending", asked the provider (not there), then sent once more
    (row,) = app.admin(OPERATOR).outbox(job_id=job.id)
    assert (row.sends, row.reconciliations, row.status) == (2, 1, OutboxStatus.SENT)
    assert provider.lookups[token] == 1 and provider.posts[token] == 2 and len(provider.delivered) == 1


def test_a_permanent_refusal_fails_the_row_for_an_operator_after_the_others_are_sent(app: App, provider) -> None:
    recipients = ["ann@example.com", "typo@invalid.example", "bob@example.com"]
    job = app.enqueue("notify_review", kwargs={"changelist": "cl-3", "version": 1, "recipients": recipients}).job
    _run(app, job.id)
    failed = app.client.job(job.id)
    assert (failed.status, failed.error_code, failed.attempts) == (Status.FAILED, "VALIDATION_FAILED", 1)
    (bad,) = app.admin(OPERATOR).outbox(status="failed")
    assert bad.key == canonical(["cl-3", "typo@invalid.example", 1])
    assert bad.error_code == "VALIDATION_FAILED" and bad.notified_at is None
    assert [r.status for r in app.admin(OPERATOR).outbox(status=OutboxStatus.SENT)] == [OutboxStatus.SENT] * 2
    (letter,) = app.admin(OPERATOR).dead_letters()
    assert letter.context["outbox_undelivered"] == 1 and letter.context["outbox_delivered"] == 2


def test_a_row_marked_sent_without_provider_evidence_is_reconciled_before_any_send(
        app: App, provider, db_url: str) -> None:
    first = app.enqueue("notify_review", kwargs={"changelist": "cl-4", "version": 1, "recipients": TEAM[:1]}).job
    _run(app, first.id)
    # Someone broke send-then-mark: one row lost its provider id, another was
    # marked sent although nothing was ever sent (§8.2, second row).
    delivered_key = canonical(["cl-4", TEAM[0], 1])
    phantom_key = canonical(["cl-4", TEAM[1], 1])
    _sql(db_url, "UPDATE redrive_outbox SET provider_id = NULL WHERE key = {p}", delivered_key)
    _sql(db_url, "INSERT INTO redrive_outbox (key, token, status, notified_at, job_id, created_at, updated_at)"
                 " SELECT {p}, 'x', 'sent', created_at, job_id, created_at, updated_at FROM redrive_outbox"
                 " WHERE key = " + ("%s" if db_url.startswith("postgres") else "?"),
         phantom_key, delivered_key)

    again = app.enqueue("notify_review", kwargs={"changelist": "cl-4", "version": 1, "recipients": TEAM[:2]}).job
    _run(app, again.id)
    assert app.client.job(again.id).result == {TEAM[0]: "reconciled", TEAM[1]: "sent"}
    assert provider.posts[_token("cl-4", TEAM[0], 1)] == 1  # found at the provider: not sent again
    assert provider.posts[_token("cl-4", TEAM[1], 1)] == 1  # not at the provider: sent, once
    rows = {r.key: r for r in app.admin(OPERATOR).outbox(job_id=again.id)}
    assert rows[delivered_key].provider_id == provider.delivered[_token("cl-4", TEAM[0], 1)]["id"]
    assert rows[phantom_key].reconciliations == 1 and rows[phantom_key].status is OutboxStatus.SENT


def test_a_stale_worker_cannot_record_a_delivery(app: App, provider) -> None:
    seen: list[str] = []

    @app.task
    def contested() -> None:
        lease = current_job().lease
        app.store.jobs_finish([Requeue(lease)])  # the lease is taken away mid-run
        try:
            deliver([email("cl-5", TEAM[0], 1)])
        except LeaseLost as exc:
            seen.append(str(exc))
            raise

    job = app.enqueue("contested").job
    asyncio.run(_run_until(app, lambda: seen))
    assert "lost its lease" in seen[0]
    assert app.admin(OPERATOR).outbox().items == [] and provider.posts == {}  # fenced before anything was written or sent
    assert app.client.job(job.id).status in (Status.QUEUED, Status.RUNNING)


def test_a_row_gone_while_the_lease_holds_is_written_again_and_the_effect_sent_once(
    app: App, db_url: str, provider, caplog,
) -> None:
    # As after a failover to a standby that had not received the row: it is
    # gone, the job's lease is not, and the delivery is no lost lease.
    sent = email("cl-6", TEAM[0], 1)
    key = canonical(list(sent.key))

    def send_then_lose_the_row(token: str) -> str:
        provider_id = sent.send(token)
        _sql(db_url, "DELETE FROM redrive_outbox WHERE key = {p}", key)
        return provider_id

    @app.task
    def forgotten() -> dict:
        return {d.key[1]: d.how for d in deliver([Intent(sent.key, send_then_lose_the_row, sent.lookup)])}

    job = app.enqueue("forgotten").job
    _run(app, job.id)
    done = app.client.job(job.id)
    assert (done.status, done.attempts, done.result) == (Status.SUCCEEDED, 1, {TEAM[0]: "sent"})
    (row,) = app.admin(OPERATOR).outbox(job_id=job.id)
    token = _token("cl-6", TEAM[0], 1)
    assert (row.status, row.provider_id) == (OutboxStatus.SENT, provider.delivered[token]["id"])
    assert provider.posts[token] == 1
    assert "was gone while its job held the lease" in caplog.text


def test_a_run_that_finds_its_lease_lost_is_dropped_not_failed_as_a_bug(app: App) -> None:
    # LeaseLost raised while the lease still holds (it had lapsed a moment,
    # unclaimed): no failure is written; the lease expires and the job runs again.
    @app.task(max_attempts=3)
    def doubting() -> str:
        if current_job().attempts == 1:
            raise LeaseLost("a fenced write was refused")
        return "ran again"

    job = app.enqueue("doubting").job
    asyncio.run(_run_until(app, lambda: app.client.job(job.id).status is Status.SUCCEEDED,
                           lease_ttl=timedelta(seconds=1)))
    done = app.client.job(job.id)
    assert (done.attempts, done.result, done.error_code) == (2, "ran again", None)
    events = app.client.job_events(job.id)
    assert [e.to_status for e in events] == [Status.QUEUED, Status.RUNNING, Status.QUEUED, Status.RUNNING,
                                             Status.SUCCEEDED], events
    assert events[2].meta.get("reason") != "BUG" and "BUG" not in str(events[2].meta), events[2].meta


@pytest.mark.parametrize("key", [(), "cl-1", ("cl", object())])
def test_an_outbox_key_must_be_a_tuple_of_json_values(key) -> None:
    with pytest.raises(ConfigError, match="outbox key"):
        Intent(key, lambda token: "id", lambda token, pid: None)


def _sql(db_url: str, statement: str, *params: str) -> None:
    if db_url.startswith("postgres"):
        with psycopg.connect(db_url) as conn:
            conn.execute(statement.replace("{p}", "%s"), params)
    else:
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
            conn.execute(statement.replace("{p}", "?"), params)
