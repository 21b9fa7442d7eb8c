"""Counters and histograms as a scrape reads them: Prometheus' cumulative
buckets (``le`` is inclusive), sums, counts, redacted label values."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from redrive import App
from redrive.metrics import Metrics
from tests.canaries import CANARIES, leaked


def _samples(metrics: Metrics) -> dict[tuple[str, frozenset], float]:
    text = metrics.exposition().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_buckets_are_cumulative_and_inclusive(tmp_path) -> None:
    app = App(f"sqlite:///{tmp_path / 'r.db'}")
    metrics = Metrics(app, buckets=(0.1, 1.0), gauges=False)
    for seconds in (0.05, 0.1, 0.5, 1.0, 7.0):
        app.events.emit("job.succeeded", job_id="j", task="t", queue="q", attempt=1, duration_s=seconds,
                        wait_s=seconds / 10)
    app.events.emit("job.failed", job_id="j", task="t", queue="q", attempt=3, stage=None, error_code="UPSTREAM_5XX",
                    upstream_status=503, error_class="UPSTREAM_5XX", retryable=True, duration_s=0.2, wait_s=0.0)
    got = _samples(metrics)
    ok = {"task": "t", "queue": "q", "outcome": "succeeded"}
    bucket = lambda le: got[("redrive_job_duration_seconds_bucket", frozenset({**ok, "le": le}.items()))]
    assert (bucket("0.1"), bucket("1.0"), bucket("+Inf")) == (2, 4, 5)
    assert got[("redrive_job_duration_seconds_count", frozenset(ok.items()))] == 5
    assert got[("redrive_job_duration_seconds_sum", frozenset(ok.items()))] == 8.65
    assert got[("redrive_jobs_completed_total", frozenset({**ok, "error_code": ""}.items()))] == 5
    failed = frozenset({"task": "t", "queue": "q", "outcome": "failed", "error_code": "UPSTREAM_5XX"}.items())
    assert got[("redrive_jobs_completed_total", failed)] == 1
    assert got[("redrive_jobs_reclaimed_total", frozenset())] == 0  # unlabelled: there from the start
    waits = frozenset({"task": "t", "queue": "q"}.items())
    assert got[("redrive_job_queue_wait_seconds_count", waits)] == 6  # every attempt's, whatever its outcome
    assert got[("redrive_job_queue_wait_seconds_sum", waits)] == 0.865
    app.close()


def test_label_values_are_redacted(tmp_path) -> None:
    app = App(f"sqlite:///{tmp_path / 'r.db'}")
    metrics = Metrics(app, gauges=False)
    for secret in CANARIES:
        app.events.emit("job.enqueued", job_id="j", task=f"send {secret}", queue=secret)
    text = metrics.exposition().decode()
    assert text.count("redrive_jobs_enqueued_total{") == len(CANARIES) and leaked(text) == []
    # Two addresses redact alike: one series, counting both
    app.events.emit("job.enqueued", job_id="j", task="t", queue="grace.hopper@example.com")
    app.events.emit("job.enqueued", job_id="j", task="t", queue="alan.turing@example.com")
    got = _samples(metrics)
    assert got[("redrive_jobs_enqueued_total", frozenset({"task": "t", "queue": "[EMAIL]"}.items()))] == 2
    app.close()


def test_ends_counted_in_batches_and_at_a_scrape_add_up_from_several_threads(tmp_path) -> None:
    """A worker's attempts' ends are counted a batch at a time; a scrape counts
    what waits. Ends from several threads at once are each counted once."""
    import threading

    app = App(f"sqlite:///{tmp_path / 'r.db'}")
    metrics = Metrics(app, buckets=(1.0,), gauges=False)
    per_thread = 3 * metrics.tally.BATCH + 7  # several full batches, then some waiting for the scrape

    def run(task: str) -> None:
        for i in range(per_thread):
            if i % 3:
                app.events.emit("job.succeeded", job_id="j", task=task, queue="q", attempt=1, duration_s=0.5,
                                wait_s=2.0)
            else:
                app.events.emit("job.retry_scheduled", job_id="j", task=task, queue="q", attempt=1, stage=None,
                                error_code="UPSTREAM_5XX", upstream_status=503, delay_s=1.0, duration_s=1.5,
                                wait_s=0.0)

    threads = [threading.Thread(target=run, args=(task,)) for task in ("a", "b", "a")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    got = _samples(metrics)
    retries = len(range(0, per_thread, 3))
    for task, runs in (("a", 2), ("b", 1)):
        succeeded = frozenset({"task": task, "queue": "q", "outcome": "succeeded", "error_code": ""}.items())
        assert got[("redrive_jobs_completed_total", succeeded)] == runs * (per_thread - retries)
        retried = frozenset({"task": task, "queue": "q", "error_code": "UPSTREAM_5XX"}.items())
        assert got[("redrive_job_retries_scheduled_total", retried)] == runs * retries
        waits = frozenset({"task": task, "queue": "q"}.items())
        assert got[("redrive_job_queue_wait_seconds_count", waits)] == runs * per_thread
        assert got[("redrive_job_queue_wait_seconds_bucket", frozenset({*waits, ("le", "1.0")}))] == runs * retries
        durations = frozenset({"task": task, "queue": "q", "outcome": "retried", "le": "1.0"}.items())
        assert got[("redrive_job_duration_seconds_bucket", durations)] == 0
    assert not metrics.tally.ends
    app.close()


def test_a_supervisor_sums_its_processes_counts_and_keeps_a_gone_ones(tmp_path) -> None:
    from redrive.metrics import ProcessTallies, Tally

    apps = [App(f"sqlite:///{tmp_path / f'{n}.db'}") for n in range(3)]
    supervisor, *children = (Metrics(app, buckets=(0.1, 1.0), gauges=False) for app in apps)
    for n, app in enumerate(apps):
        for _ in range(n + 1):  # the supervisor one, the children two and three
            app.events.emit("job.succeeded", job_id="j", task="t", queue="q", attempt=1, duration_s=0.5, wait_s=0.0)
    apps[0].events.emit("job.reclaimed", job_id="j", task="t", queue="q", attempt=1, status="queued")
    tallies = ProcessTallies(supervisor.tally)
    supervisor.registry.unregister(supervisor.tally)
    supervisor.registry.register(tallies)
    for n, child in enumerate(children):
        tallies.reported(f"c{n}", child.tally.snapshot())
    ok = frozenset({"task": "t", "queue": "q", "outcome": "succeeded", "error_code": ""}.items())
    durations = frozenset({"task": "t", "queue": "q", "outcome": "succeeded"}.items())
    got = _samples(supervisor)
    assert got[("redrive_jobs_completed_total", ok)] == 6
    assert got[("redrive_job_duration_seconds_count", durations)] == 6
    assert got[("redrive_jobs_reclaimed_total", frozenset())] == 1
    # A child gone: its last counts stay; a scrape twice counts nothing twice
    tallies.reported("c1", None)
    assert _samples(supervisor)[("redrive_jobs_completed_total", ok)] == 6
    assert _samples(supervisor)[("redrive_jobs_completed_total", ok)] == 6
    # Counts from other buckets keep their counters and leave their histograms out
    other = Tally((5.0,))
    other.inc("redrive_jobs_completed", ("t", "q", "succeeded", ""), 4)
    tallies.reported("c9", other.snapshot())
    assert _samples(supervisor)[("redrive_jobs_completed_total", ok)] == 10
    assert _samples(supervisor)[("redrive_job_duration_seconds_count", durations)] == 6
    for app in apps:
        app.close()
