"""A worker process run with metrics and JSON logs on, as an operator runs
it: its metrics, scraped during the run, add up to the store's counts at the
end; every line it logs is JSON carrying its event's fields; planted secrets
reach no metric and no log line."""

from __future__ import annotations

import json
import re
from collections import Counter

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from redrive import Actor, Admin, Client, JobRequest, Settings, Status
from redrive.events import CATALOGUE
from redrive.testing import count_jobs, wait_for
from tests.apps.observed import app as observed
from tests.canaries import CANARIES, leaked
from tests.conftest import every_job
from tests.integration.processes import WorkerProcess

SECRET_QUEUE = "xoxb-123456789012-abcdefghijklmnop"  # a careless client's queue name


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]


def _total(samples, name: str, **labels: str) -> float:
    return sum(v for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items()))


def test_metrics_add_up_to_the_store_and_logs_are_json(db_url, tmp_path, workers) -> None:
    worker = WorkerProcess(db_url, tmp_path, "--metrics-port", "0", "--log-format", "json",
                           "-q", "default", "-q", SECRET_QUEUE, "-c", "8", "--poll-interval", "0.2",
                           app="tests.apps.observed:app")
    workers.append(worker)

    def said() -> str | None:  # port 0: one the system picks, which the worker logs
        found = re.search(r"metrics at (http://127\.0\.0\.1:\d+/metrics)", worker.log)
        return found.group(1) if found else None

    url = wait_for(said, timeout=60, what="the worker saying where its metrics are")
    client = Client(observed.registry, settings=Settings.load(database_url=db_url))
    secrets = " ".join(CANARIES)
    requests = ([JobRequest("fine", args=[n]) for n in range(60)]
                + [JobRequest("fine", args=[n], queue=SECRET_QUEUE) for n in range(5)]
                + [JobRequest("refuse", args=["BAD_INPUT", secrets]) for _ in range(7)]
                + [JobRequest("refuse", args=["GONE", secrets]) for _ in range(4)]
                + [JobRequest("flaky", args=[f"k{n}"]) for n in range(6)])
    client.enqueue_many(requests)

    scrapes = []

    def drained() -> bool:
        scrapes.append(httpx.get(url).text)  # scraped during the run: each must parse
        return sum(count_jobs(client.store)[s] for s in (Status.SUCCEEDED, Status.FAILED)) == len(requests)

    wait_for(drained, timeout=120, every=0.3)
    wait_for(lambda: _total(_samples(httpx.get(url).text), "redrive_dead_letters_opened_total") == 11, timeout=10)
    end = httpx.get(url).text
    assert worker.stop() == 0, worker.log
    for text in scrapes:
        _samples(text)
    samples = _samples(end)

    # What the worker counted equals what the store holds
    jobs = list(every_job(client))
    failed_by_code = Counter(j.error_code for j in jobs if j.status is Status.FAILED)
    assert _total(samples, "redrive_jobs_completed_total", outcome="succeeded") == 71
    assert {code: _total(samples, "redrive_jobs_completed_total", outcome="failed", error_code=code)
            for code in failed_by_code} == failed_by_code == {"BAD_INPUT": 7, "GONE": 4}
    letters = Admin(client.store, actor=Actor.operator("test")).dead_letter_facets()
    assert _total(samples, "redrive_dead_letters_opened_total") == letters.total == 11
    assert _total(samples, "redrive_job_retries_scheduled_total", error_code="UPSTREAM_5XX") == 6
    attempts = sum(j.attempts for j in jobs)
    assert _total(samples, "redrive_job_duration_seconds_count") == attempts
    assert _total(samples, "redrive_job_queue_wait_seconds_count") == attempts
    assert _total(samples, "redrive_queue_jobs") == 0 and _total(samples, "redrive_store_up") == 1
    assert leaked(end) == [] and all(leaked(text) == [] for text in scrapes)

    # Every line is JSON; an event's line carries its event's fields
    lines = [line for line in worker.log.splitlines() if line.strip()]
    parsed = [json.loads(line) for line in lines]
    events = [p for p in parsed if "event" in p]
    assert {p["event"] for p in events} >= {"worker.started", "job.succeeded", "job.retry_scheduled",
                                            "job.failed", "job.dead_lettered", "worker.stopped"}
    for p in parsed:
        assert {"ts", "level", "logger", "message"} <= set(p), p
    for p in events:
        millis = {"duration_s": "duration_ms", "wait_s": "wait_ms"}  # seconds are written as milliseconds
        wanted = {millis.get(name, name) for name in CATALOGUE[p["event"]] - {"lease_token"}}
        assert wanted <= set(p), (wanted - set(p), p)
        if p["event"] in ("job.succeeded", "job.failed", "job.retry_scheduled"):
            assert p["status"] in ("succeeded", "failed", "retry") and p["duration_ms"] >= 0 and p["wait_ms"] >= 0
    assert any(p["logger"] == "observed" for p in parsed)  # the task's own careless line, redacted
    assert leaked(worker.log) == []
    client.close()


@pytest.mark.slow
def test_workers_register_report_what_they_run_and_leave(db_url, tmp_path, workers) -> None:
    from tests.apps.drain import app as drain_app
    from tests.e2e.test_cli import redrive

    client = Client(drain_app.registry, settings=Settings.load(database_url=db_url))
    # Short leases: heartbeats (and so the running counts) every second; a short grace: the
    # worker stopped mid-job hands it back at once instead of waiting for it.
    quick = ("--poll-interval", "0.2", "--lease-ttl", "3s", "--shutdown-grace", "1s")
    a = WorkerProcess(db_url, tmp_path, "-c", "3", *quick)
    b = WorkerProcess(db_url, tmp_path, "-q", "default", "-q", "email", *quick)
    workers += [a, b]
    a.wait_started()  # the first to start makes the SQLite database the CLI reads
    b.wait_started()

    def listed() -> dict[int, dict]:
        done = redrive("workers", "--json", "--database-url", db_url)
        assert done.returncode == 0, done.stderr
        return {w["pid"]: w for w in map(json.loads, done.stdout.splitlines())}

    wait_for(lambda: {a.pid, b.pid} <= set(listed()), timeout=30)
    seen = listed()
    assert (seen[a.pid]["queues"], seen[a.pid]["concurrency"]) == (["default"], 3)
    assert seen[b.pid]["queues"] == ["default", "email"] and not seen[a.pid]["stale"]
    # A job running shows at the next heartbeat
    client.enqueue("sleep_then_record", args=["slow", 30])
    wait_for(lambda: sum(w["running"] for w in listed().values()) == 1, timeout=30)
    # Stopped cleanly, a worker leaves; killed, it stays (and goes stale: views.worker_view)
    b.kill()
    assert a.stop() == 0
    assert set(listed()) == {b.pid}
    client.close()
