"""The worker registry: a worker registers, renews its heartbeat and running
count, leaves when it stops, and is forgotten a day after it went silent."""

from __future__ import annotations

from datetime import timedelta

from redrive.store.port import WorkerReport
from redrive.store.reads import Reads
from redrive.testing import Clock


def _report(worker_id: str, running: int = 0) -> WorkerReport:
    return WorkerReport(worker_id, "host-a", 4242, ["default", "email"], 8, "1.2.3", running)


def test_a_worker_registers_beats_and_leaves(store: Reads) -> None:
    store.worker_report(report=_report("w1"))
    store.worker_report(report=_report("w2", running=1))
    (first, second) = store.workers_list()
    assert (first.id, first.host, first.pid, first.queues, first.concurrency, first.version, first.running) == \
        ("w1", "host-a", 4242, ["default", "email"], 8, "1.2.3", 0)
    assert second.id == "w2" and first.started_at <= second.started_at
    assert first.heartbeat_at >= first.started_at
    # A heartbeat renews the time and the count, not the registration
    store.worker_report(report=_report("w1", running=5))
    again = next(w for w in store.workers_list() if w.id == "w1")
    assert again.running == 5 and again.started_at == first.started_at and again.heartbeat_at >= first.heartbeat_at
    store.worker_remove(worker_id="w1")
    assert [w.id for w in store.workers_list()] == ["w2"]
    store.worker_remove(worker_id="w1")  # leaving twice is harmless


def test_a_silent_worker_is_forgotten_after_a_day(timed_store: Reads, clock: Clock) -> None:
    timed_store.worker_report(report=_report("killed"))
    clock.advance(timedelta(hours=23))
    timed_store.worker_report(report=_report("alive"))
    assert [w.id for w in timed_store.workers_list()] == ["killed", "alive"]
    (killed, _) = timed_store.workers_list()
    assert killed.heartbeat_at == clock.now - timedelta(hours=23)
    clock.advance(timedelta(hours=2))
    timed_store.worker_report(report=_report("alive"))
    assert [w.id for w in timed_store.workers_list()] == ["alive"]
