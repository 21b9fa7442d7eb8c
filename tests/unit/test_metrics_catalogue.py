"""docs/observability.md lists exactly the metrics redrive exports, and the
shipped alerting rules name only metrics that exist."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from redrive import App
from redrive.metrics import Metrics

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _exported(tmp_path) -> set[str]:
    app = App(f"sqlite:///{tmp_path / 'redrive.db'}")
    metrics = Metrics(app)
    names = set()
    for family in metrics.registry.collect():
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    app.close()
    return names


def test_the_documented_metrics_are_the_exported_ones(tmp_path) -> None:
    documented = set(re.findall(r"^\| `(redrive_\w+)`", (DOCS / "observability.md").read_text(), re.MULTILINE))
    assert documented == _exported(tmp_path)


def test_the_alerting_rules_name_only_metrics_that_exist(tmp_path) -> None:
    rules = yaml.safe_load((DOCS / "prometheus-rules.yml").read_text())["groups"][0]["rules"]
    assert [r["alert"] for r in rules] == ["JobFailureRateOver1Percent", "JobDurationP95Over5Minutes",
                                          "QueueDepthOver1000", "DeadLettersOpen", "WorkerStale",
                                          "JobRunningOver1Hour", "DuplicateOffersCreated"]
    exported = _exported(tmp_path)
    for rule in rules:
        for name in re.findall(r"\b(redrive_\w+?)(?:_bucket|_count|_sum)?\b(?=[\[{(\s)])", rule["expr"]):
            assert name in exported, (rule["alert"], name)


def test_the_on_call_gauges_read_the_store(tmp_path) -> None:
    """Open dead letters by task and error class, workers alive and stale,
    jobs per live worker and the longest run, from a real SQLite store."""
    from datetime import timedelta

    from prometheus_client.parser import text_string_to_metric_families

    from redrive.core.transitions import FailNow
    from redrive.store.port import WorkerReport
    from redrive.testing import Clock

    clock = Clock()
    app = App(f"sqlite:///{tmp_path / 'redrive.db'}")
    from redrive.store.sqlite.store import SQLiteStore

    app._store = store = SQLiteStore(str(tmp_path / "redrive.db"), clock=clock)
    app.task(lambda: None, name="fetch")
    app.task(lambda: None, name="render")
    for task in ("fetch", "fetch", "render", "render"):
        app.enqueue(task)
    claimed = store.jobs_claim(queues=["default"], limit=3, worker_id="w", lease_ttl=timedelta(hours=2))
    for job, code in zip(claimed, ("NOT_FOUND", "NOT_FOUND", "AUTH_DENIED"), strict=True):
        store.jobs_finish([FailNow(job.lease, code, "no")])
    report = dict(host="h", queues=["default"], concurrency=4, version="x")
    store.worker_report(report=WorkerReport(id="old:1:a", pid=1, running=0, **report))
    clock.advance(timedelta(minutes=5))  # the first worker falls silent; the second reports now
    store.worker_report(report=WorkerReport(id="new:2:b", pid=2, running=1, **report))
    (running,) = store.jobs_claim(queues=["default"], limit=1, worker_id="new:2:b", lease_ttl=timedelta(hours=2))
    clock.advance(timedelta(seconds=90))
    store.worker_report(report=WorkerReport(id="new:2:b", pid=2, running=1, **report))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(Metrics(app).exposition().decode())
               for s in family.samples}
    letters = {labels: v for (name, labels), v in samples.items() if name == "redrive_dead_letters_open"}
    by_class: dict[str, float] = {}
    for labels, value in letters.items():
        by_class[dict(labels)["error_class"]] = by_class.get(dict(labels)["error_class"], 0) + value
    assert by_class == {"NOT_FOUND": 2, "AUTH_DENIED": 1}
    assert {dict(labels)["task"] for labels in letters} <= {"fetch", "render"}
    assert samples[("redrive_workers", (("state", "alive"),))] == 1
    assert samples[("redrive_workers", (("state", "stale"),))] == 1
    assert samples[("redrive_worker_jobs_running", (("worker", "new:2:b"),))] == 1
    assert ("redrive_worker_jobs_running", (("worker", "old:1:a"),)) not in samples
    assert samples[("redrive_queue_oldest_running_age_seconds", (("queue", "default"),))] == 90
    assert running.task in ("fetch", "render")
    app.close()
