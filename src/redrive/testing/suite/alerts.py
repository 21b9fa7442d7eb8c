"""What alert rules read and keep in the store: the jobs that ended lately
(every worker's, with their last run's duration), and which rules fire now,
started and ended by conditional writes so a change is told once."""

from __future__ import annotations

from datetime import timedelta

from redrive.core.transitions import Cancellation, Completion, FailNow
from redrive.store.reads import Reads
from redrive.testing import applied, cancel, claim_one, new, reclaim, wait_for


def test_runs_ended_are_the_jobs_that_succeeded_or_failed_newest_first(store: Reads) -> None:
    since = store.now() - timedelta(seconds=1)
    store.jobs_insert(jobs=[new(task=name, queue=name, max_attempts=1) for name in ("ok", "bad", "cut", "stopped")])
    ok = claim_one(store, queues=["ok"])
    assert applied(store.jobs_finish([Completion(ok.lease, None, {"duration_ms": 1500})])) == {ok.lease}
    bad = claim_one(store, queues=["bad"])
    store.jobs_finish([FailNow(bad.lease, "NOT_PDF", "no", {"duration_ms": 250})])
    claim_one(store, queues=["cut"], ttl=timedelta(milliseconds=200))  # its worker dies: the reclaim fails it
    wait_for(lambda: reclaim(store), timeout=5)  # failed by the reclaim: no run timed it
    stopped = claim_one(store, queues=["stopped"])
    cancel(store, stopped.id, "ops")
    store.jobs_finish([Cancellation(stopped.lease, by="ops", meta={"duration_ms": 5})])  # not a run that ended
    runs = store.runs_ended(since=since)
    assert [(r.task, r.failed, r.duration_s) for r in runs] == [("cut", True, None), ("bad", True, 0.25),
                                                                 ("ok", False, 1.5)]
    assert runs[0].at >= runs[1].at >= runs[2].at >= since
    assert [r.task for r in store.runs_ended(since=since, limit=1)] == ["cut"]
    assert store.runs_ended(since=store.now() + timedelta(seconds=5)) == []


def test_an_alert_fires_and_resolves_once_whoever_writes_first(store: Reads) -> None:
    assert store.alerts_firing() == {}
    assert store.alert_fire(rule="deep_queue", incident="100", detail="queue a holds 30 jobs") is True
    # a second evaluator, or this one after a restart, finds it firing and tells nothing
    assert store.alert_fire(rule="deep_queue", incident="115", detail="queue a holds 31 jobs") is False
    assert store.alerts_firing() == {"deep_queue": "100"}
    assert store.alert_resolve(rule="deep_queue", incident="115") is False  # not that incident
    assert store.alert_resolve(rule="deep_queue", incident="100") is True
    assert store.alert_resolve(rule="deep_queue", incident="100") is False
    assert store.alerts_firing() == {}
    assert store.alert_fire(rule="deep_queue", incident="200", detail="again") is True  # a new incident
