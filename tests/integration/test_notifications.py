"""Notifications from real worker processes to a local Slack webhook and a
local SMTP server: one message per failure (or per burst), a failure the
reclaim decided told like any other, none lost or repeated when a worker is
killed mid-send, retries that block nothing, and no planted secret in any
of them."""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from redrive import Client, JobRequest, Settings, Status
from redrive.testing import count_jobs, wait_for
from tests.apps.alerting import app as alerting
from tests.canaries import CANARIES, leaked
from tests.fakes.slack import SlackWebhook, slack_webhook
from tests.fakes.smtp import Inbox, smtp_server
from tests.integration.processes import WorkerProcess, kill_and_show

BASE = "https://ops.example.com/redrive"


@pytest.fixture
def slack():
    with slack_webhook() as hook:
        yield hook


@pytest.fixture
def inbox():
    with smtp_server() as box:
        yield box


@pytest.fixture
def workers(slack, inbox):
    """Killed before the fakes stop (set up after them, torn down before):
    a worker killed mid-send after the SMTP server stopped would leave it a
    connection that is never closed, and its warning would fail whichever
    test the garbage collector happened to run in."""
    started: list[WorkerProcess] = []
    yield started
    kill_and_show(started)


def _worker(url: str, tmp_path, slack: SlackWebhook, inbox: Inbox, *, window: str = "1s",
            options: tuple[str, ...] = (), retry_for: str = "6h", timeout: str = "10s") -> WorkerProcess:
    env = {"REDRIVE_NOTIFY_RETRY_FOR": retry_for, "REDRIVE_NOTIFY_TIMEOUT": timeout,
           "REDRIVE_SLACK_WEBHOOK_URL": slack.url, "REDRIVE_SMTP_HOST": "127.0.0.1",
           "REDRIVE_SMTP_PORT": str(inbox.port), "REDRIVE_SMTP_STARTTLS": "false",
           "REDRIVE_EMAIL_FROM": "redrive@example.com", "REDRIVE_EMAIL_TO": "oncall@example.com",
           "REDRIVE_DASHBOARD_URL": BASE, "REDRIVE_NOTIFY_WINDOW": window, "REDRIVE_ALERT_INTERVAL": "0.3s"}
    return WorkerProcess(url, tmp_path, "-c", "20", "--poll-interval", "0.2", *options,
                         app="tests.apps.alerting:app", env=env)


def _client(url: str) -> Client:
    return Client(alerting.registry, settings=Settings.load(database_url=url))


def _quiet_for(seconds: float, slack: SlackWebhook, inbox: Inbox) -> None:
    """Nothing more arrives for a while (a second message would come by then)."""
    seen = (len(slack.messages), len(inbox.messages))
    time.sleep(seconds)
    assert (len(slack.messages), len(inbox.messages)) == seen


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_a_job_that_fails_for_good_makes_one_slack_message_and_one_email(db_url, tmp_path, workers, slack,
                                                                          inbox) -> None:
    workers.append(_worker(db_url, tmp_path, slack, inbox))
    client = _client(db_url)
    job = client.enqueue("doomed", args=["invoice-7.pdf", " ".join(CANARIES)], owner="tenant-7").job
    wait_for(lambda: slack.messages and inbox.messages, timeout=60, what="a Slack message and an email")
    _quiet_for(3, slack, inbox)
    assert (len(slack.messages), len(inbox.messages)) == (1, 1)  # one of each, not one more
    (text,), (mail,) = slack.messages, inbox.messages
    body = mail.get_content() if hasattr(mail, "get_content") else mail.get_payload()
    for shown in (text, f"{mail['Subject']}\n{body}"):
        for field in (str(job.id), "tenant-7", "doomed", "BAD_INPUT", "cannot convert invoice-7.pdf",
                      "Attempts: 1", f"{BASE}/jobs/{job.id}"):
            assert field in shown, (field, shown)
        assert leaked(shown) == [], shown
    assert mail["To"] == "oncall@example.com"
    client.close()


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_a_job_whose_worker_died_on_its_last_attempt_is_told_counted_and_logged(db_url, tmp_path, workers, slack,
                                                                              inbox) -> None:
    """The crashes operators most need to hear of (an OOM kill, a segfault):
    the reclaim fails the job, and it is notified once, counted as failed
    and logged as a failure, as a task's own failure is."""
    doomed = _worker(db_url, tmp_path, slack, inbox, options=("--lease-ttl", "2"))
    workers.append(doomed)
    client = _client(db_url)
    job = client.enqueue("stuck", args=["report-9.pdf"], owner="tenant-9").job
    wait_for(lambda: client.job(job.id).status is Status.RUNNING, timeout=30, what="the job running")
    doomed.kill()  # SIGKILL mid-run, on its only attempt
    survivor = _worker(db_url, tmp_path, slack, inbox,
                       options=("--lease-ttl", "2", "--metrics-port", "0", "--log-format", "json"))
    workers.append(survivor)
    wait_for(lambda: len(slack.messages) == 1 and len(inbox.messages) == 1, timeout=60,
             what="the notification of the job its worker took down")
    _quiet_for(3, slack, inbox)
    assert client.job(job.id).status is Status.FAILED
    for field in (str(job.id), "tenant-9", "stuck", "LEASE_EXPIRED", "Attempts: 1"):
        assert field in slack.messages[0], (field, slack.messages[0])
    metrics = re.search(r"metrics at (http://127\.0\.0\.1:\d+/metrics)", survivor.log).group(1)
    samples = [(s.name, s.labels, s.value)
               for family in text_string_to_metric_families(httpx.get(metrics).text) for s in family.samples]
    counted = {(name, labels.get("outcome"), labels.get("error_code"), labels.get("error_class")): value
               for name, labels, value in samples if labels.get("task") == "stuck"}
    assert counted[("redrive_jobs_completed_total", "failed", "LEASE_EXPIRED", None)] == 1
    assert counted[("redrive_dead_letters_opened_total", None, None, "LEASE_EXPIRED")] == 1
    lines = [json.loads(line) for line in survivor.log.splitlines() if line.startswith("{")]
    (failed,) = [line for line in lines if line.get("event") == "job.failed"]
    assert (failed["job_id"], failed["status"], failed["error_code"], failed["attempt"]) == (
        str(job.id), "failed", "LEASE_EXPIRED", 1)
    # this job's reclaim (with a 2 s lease, a loaded machine may also see the
    # survivor's own notification job reclaimed, and requeued: not this job)
    (reclaimed,) = [line for line in lines if line.get("event") == "job.reclaimed" and line.get("job_id") == str(job.id)]
    assert reclaimed["status"] == "failed"
    client.close()


@pytest.mark.slow
def test_a_burst_of_500_failures_makes_one_digest(pg_url, tmp_path, workers, slack, inbox) -> None:
    window = 12
    wait_for(lambda: time.time() % window <= 2, timeout=window, every=0.2,
             what="a window opening")  # start just after a window opens: the burst fits in it
    workers.append(_worker(pg_url, tmp_path, slack, inbox, window=f"{window}s", options=("-c", "50")))
    client = _client(pg_url)
    client.enqueue_many([JobRequest("doomed", args=[f"doc-{n}", CANARIES[0]], owner=f"tenant-{n % 7}")
                         for n in range(500)])
    wait_for(lambda: count_jobs(client.store)[Status.FAILED] == 500, timeout=window)
    # the digest goes once the window closes: this waits on it (the bound is a
    # guard against a hang; under stress-ng it once took longer than two windows)
    wait_for(lambda: slack.messages and inbox.messages, timeout=120, what="the digest")
    _quiet_for(5, slack, inbox)
    assert len(slack.messages) == 1 and len(inbox.messages) == 1
    assert "500 jobs of doomed failed for good" in slack.messages[0] and "BAD_INPUT ×500" in slack.messages[0]
    assert inbox.messages[0]["Subject"] == "500 jobs of doomed failed for good"
    assert leaked(slack.messages[0]) == []
    client.close()


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_a_worker_killed_after_the_send_before_the_record_sends_nothing_twice(pg_url, tmp_path, workers,
                                                                            slack, inbox) -> None:
    slack.hold_next(60)  # takes the message, then never confirms it to this worker
    first = _worker(pg_url, tmp_path, slack, inbox, options=("--lease-ttl", "2"))
    workers.append(first)
    client = _client(pg_url)
    client.enqueue("doomed", args=["a.pdf", "x"])
    wait_for(lambda: len(slack.messages) == 1, timeout=60)
    first.kill()  # SIGKILL between Slack's send and the outbox's record of it
    assert inbox.messages == []
    workers.append(_worker(pg_url, tmp_path, slack, inbox, options=("--lease-ttl", "2")))
    wait_for(lambda: len(inbox.messages) == 1, timeout=60)  # the email, not sent before the kill, is
    _quiet_for(4, slack, inbox)
    assert len(slack.messages) == 1  # and the Slack message is not sent again
    client.close()


@pytest.mark.slow
def test_a_failing_or_hanging_webhook_is_retried_and_blocks_no_job(tmp_path, workers, slack, inbox) -> None:
    url = f"sqlite:///{tmp_path / 'redrive.db'}"
    slack.fail_next(2, 500)
    slack.hang_next(1, 8)  # past the channel's timeout (REDRIVE_NOTIFY_TIMEOUT)
    workers.append(_worker(url, tmp_path, slack, inbox, timeout="4s"))
    client = _client(url)
    client.enqueue("doomed", args=["a.pdf", "x"])
    wait_for(lambda: slack.posts >= 3, timeout=60)  # hanging now
    others = client.enqueue_many([JobRequest("fine", args=[n]) for n in range(50)])
    wait_for(lambda: all(client.job(r.job.id).status is Status.SUCCEEDED for r in others), timeout=8)
    assert slack.messages == []  # every job ran while the webhook hung
    wait_for(lambda: len(slack.messages) == 1, timeout=90)
    _quiet_for(3, slack, inbox)
    assert len(inbox.messages) == 1 and slack.posts == 4
    client.close()


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_a_channel_down_for_the_whole_retry_time_is_given_up_on_loudly(db_url, tmp_path, workers, slack,
                                                                      inbox) -> None:
    """Slack answers 503 for longer than the notification's retry time
    (REDRIVE_NOTIFY_RETRY_FOR, hours by default; seconds here): the email
    goes out at once, Slack is retried until the time is spent, and then the
    give-up is an error in the log, a count of its own, and an email saying
    which channel never got what."""
    slack.fail_next(10_000, 503)
    worker = _worker(db_url, tmp_path, slack, inbox, options=("--metrics-port", "0", "--log-format", "json"),
                     retry_for="4s")
    workers.append(worker)
    client = _client(db_url)
    client.enqueue("doomed", args=["invoice-8.pdf", "x"], owner="tenant-8")
    wait_for(lambda: len(inbox.messages) == 2, timeout=60, what="the failure, then the give-up, by email")
    first, gave_up = (f"{m['Subject']}\n{m.get_payload(decode=True).decode()}" for m in inbox.messages)
    assert first.startswith("Job failed for good: doomed")
    assert "not delivered on slack" in gave_up and "Job failed for good: doomed" in gave_up, gave_up
    assert slack.posts >= 3  # tried on, refused every time
    lines = [json.loads(line) for line in worker.log.splitlines() if line.startswith("{")]
    (told,) = [line for line in lines if line.get("event") == "notification.undelivered"]
    assert (told["level"], told["channels"], told["about"]) == ("error", "slack", "failed")
    metrics = re.search(r"metrics at (http://127\.0\.0\.1:\d+/metrics)", worker.log).group(1)
    counted = {(s.name, s.labels.get("channel"), s.labels.get("about")): s.value
               for family in text_string_to_metric_families(httpx.get(metrics).text) for s in family.samples}
    assert counted[("redrive_notifications_undelivered_total", "slack", "failed")] == 1
    _quiet_for(3, slack, inbox)  # the give-up is told once, and never about itself
    client.close()


def test_a_hanging_webhook_holds_none_of_a_one_slot_workers_jobs(db_url, tmp_path, workers, slack, inbox) -> None:
    """Notifications run in slots of their own, besides the worker's
    concurrency: with ``-c 1``, jobs keep completing while a send hangs."""
    url = db_url
    slack.hang_next(1, 20)  # past the channel's 10 s timeout
    workers.append(_worker(url, tmp_path, slack, inbox, options=("-c", "1")))
    client = _client(url)
    client.enqueue("doomed", args=["a.pdf", "x"])
    wait_for(lambda: slack.posts == 1, timeout=60, what="the notification's send hanging")
    others = client.enqueue_many([JobRequest("fine", args=[n]) for n in range(30)])
    wait_for(lambda: all(client.job(r.job.id).status is Status.SUCCEEDED for r in others), timeout=8,
             what="the jobs running beside the hanging send")
    # all done while the send still hung: nothing was posted again, nothing delivered
    assert slack.posts == 1 and slack.messages == []
    client.close()


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_an_alert_on_queue_depth_fires_once_and_resolves_once(db_url, tmp_path, workers, slack, inbox) -> None:
    url = db_url
    watcher = _worker(url, tmp_path, slack, inbox, options=("--alerts",))  # serves default, not bulk
    workers.append(watcher)
    wait_for(lambda: "alerts on: bulk_backlog" in watcher.log, timeout=30)
    client = _client(url)
    client.enqueue_many([JobRequest("bulk", args=[n]) for n in range(15)])
    _quiet_for(2, slack, inbox)  # 15 queued: under the threshold of 20
    assert slack.messages == []
    client.enqueue_many([JobRequest("bulk", args=[n]) for n in range(15, 30)])
    wait_for(lambda: len(slack.messages) == 1 and len(inbox.messages) == 1, timeout=30)
    _quiet_for(2, slack, inbox)  # still over it: no second message
    assert "Alert bulk_backlog firing" in slack.messages[0] and "holds 30 queued jobs" in slack.messages[0]
    # An evaluator restarted while the rule fires finds it firing in the store: no second message
    assert watcher.stop() == 0
    restarted = _worker(url, tmp_path, slack, inbox, options=("--alerts",))
    workers.append(restarted)
    wait_for(lambda: "alerts on: bulk_backlog" in restarted.log, timeout=30)
    _quiet_for(2, slack, inbox)  # six rounds of the restarted evaluator
    workers.append(_worker(url, tmp_path, slack, inbox, options=("-q", "bulk")))  # drains it
    wait_for(lambda: len(slack.messages) == 2 and len(inbox.messages) == 2, timeout=60)
    _quiet_for(2, slack, inbox)
    assert "Alert bulk_backlog resolved" in slack.messages[1] and len(slack.messages) == 2
    assert [m["Subject"] for m in inbox.messages] == ["Alert bulk_backlog firing", "Alert bulk_backlog resolved"]
    client.close()


def test_a_failure_rate_alert_sees_the_jobs_other_workers_ran(db_url, tmp_path, workers, slack, inbox) -> None:
    """The evaluator reads the endings from the store: it runs none of the jobs itself."""
    url = db_url
    watcher = _worker(url, tmp_path, slack, inbox, options=("--alerts", "-q", "bulk"))
    workers.append(watcher)
    wait_for(lambda: "alerts on: bulk_backlog, doomed_failing" in watcher.log, timeout=30)
    workers.append(_worker(url, tmp_path, slack, inbox))  # runs the doomed jobs, evaluates nothing
    client = _client(url)
    client.enqueue_many([JobRequest("doomed", args=[f"doc-{n}", "x"]) for n in range(6)])
    wait_for(lambda: any("Alert doomed_failing firing" in m for m in slack.messages), timeout=60,
             what="the failure-rate alert")
    (alert,) = [m for m in slack.messages if "Alert doomed_failing" in m]
    assert "6 of 6 jobs failed for good" in alert
    client.close()
