"""The outbox under crashes: worker processes SIGKILLed at each point of the
send sequence, against a local provider that records every call and dedupes
by idempotency key. Every intent is applied exactly once, and no send is
even repeated: a send that may have happened is looked up first."""

from __future__ import annotations

import time

import pytest

from redrive import Actor, Admin, Client, OutboxStatus, Settings, Status
from redrive.core.ids import canonical, outbox_token
from tests.apps.notify import app as notify_app
from tests.fakes import mail
from tests.integration.processes import WorkerProcess

pytestmark = pytest.mark.slow

CHANGELISTS = ["cl-1", "cl-2", "cl-3"]
TEAM = ["ann@example.com", "bob@example.com", "cy@example.com"]


@pytest.mark.parametrize("crash_at", ["before_send", "after_send", "after_record"])
def test_every_intent_is_applied_once_whatever_the_crash_point(db_url, tmp_path, workers, crash_at) -> None:
    client = Client(notify_app.registry, settings=Settings.load(database_url=db_url))
    jobs = [client.enqueue("notify_review", kwargs={"changelist": cl, "version": 2, "recipients": TEAM}).job
            for cl in CHANGELISTS]
    with mail.serving() as provider:
        env = {"REDRIVE_TEST_PROVIDER": provider.url, "REDRIVE_TEST_CRASH_AT": crash_at}

        def start() -> WorkerProcess:
            worker = WorkerProcess(db_url, tmp_path, "-c", "1", "--lease-ttl", "1", "--poll-interval", "0.1",
                                   app="tests.apps.notify:app", env=env)
            workers.append(worker)
            return worker

        # Two workers at a time; each one killed is replaced, as a supervisor would.
        live = [start(), start()]
        deadline = time.monotonic() + 90
        while not all(client.job(j.id).status is Status.SUCCEEDED for j in jobs):
            assert time.monotonic() < deadline, [client.job(j.id).status for j in jobs]
            live = [w if w.process.poll() is None else start() for w in live]
            time.sleep(0.1)
        for worker in live:
            assert worker.stop() == 0

    killed = [w for w in workers if w.process.returncode == -9]
    assert len(killed) == len(CHANGELISTS)  # each job's first run died at the crash point
    assert len(provider.delivered) == len(CHANGELISTS) * len(TEAM)
    for cl in CHANGELISTS:
        for recipient in TEAM:
            token = outbox_token((cl, recipient, 2))
            assert provider.posts[token] == 1, (cl, recipient)  # applied once, never even resent
    rows = {r.key: r for r in Admin(client.store, actor=Actor.operator("test")).outbox(limit=100)}
    assert {r.status for r in rows.values()} == {OutboxStatus.SENT}

    for job in jobs:
        done = client.job(job.id)
        first = rows[canonical([done.kwargs["changelist"], TEAM[0], 2])]
        if crash_at == "after_record":
            # Every row was recorded before the crash: the rerun sends nothing
            assert done.result == {r: "already_sent" for r in TEAM}
            assert first.reconciliations == 0
        elif crash_at == "after_send":
            # The provider had the message, the row did not: found by lookup, not resent
            assert done.result == {TEAM[0]: "reconciled", TEAM[1]: "sent", TEAM[2]: "sent"}
            assert (first.reconciliations, first.sends) == (1, 1)
        else:
            # The row said "sending" but the provider had nothing: looked up, then sent
            assert done.result == {r: "sent" for r in TEAM}
            assert (first.reconciliations, first.sends) == (1, 2)
            assert provider.lookups[first.token] == 1
    client.close()
