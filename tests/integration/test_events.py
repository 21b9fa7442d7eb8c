"""The event stream, seen by a subscriber: the documented events with their
documented payloads, in the order things happened (in-process worker)."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import pytest

from redrive import Actor, App, ConfigError, Fixed, MemoryStore, Permanent, Status, Transient, current_job
from redrive.core.transitions import Requeue
from redrive.events import CATALOGUE, Event
from tests.integration.test_worker_in_process import _run_until

FAST = Fixed([timedelta(milliseconds=10)])


def test_a_job_that_retries_twice_dead_letters_is_replayed_and_succeeds() -> None:
    app = App(store=MemoryStore())
    broken = threading.Event()
    broken.set()

    @app.task(max_attempts=3, backoff=FAST)
    def call_llm(doc: int) -> str:
        if broken.is_set():
            raise Transient("the provider answered 503", code="UPSTREAM_5XX")
        return f"summary of {doc}"

    seen: list[Event] = []
    app.events.subscribe(seen.append)
    job = app.enqueue(call_llm, args=[7]).job

    # Given three failed attempts, the job is dead-lettered
    asyncio.run(_run_until(app, lambda: app.client.job(job.id).status is Status.FAILED))
    # When an operator replays it once the provider is back
    broken.clear()
    (letter,) = app.admin(Actor.operator("ops")).dead_letters()
    app.admin(Actor.operator("ops")).replay([letter.id])
    asyncio.run(_run_until(app, lambda: app.client.job(job.id).status is Status.SUCCEEDED))

    # Then the stream told the whole story of the job, in order
    mine = [e for e in seen if e.data.get("job_id") == str(job.id)]
    assert [e.name for e in mine] == [
        "job.enqueued", "job.claimed", "job.retry_scheduled", "job.claimed", "job.retry_scheduled",
        "job.claimed", "job.failed", "job.dead_lettered", "job.replayed", "job.claimed", "job.succeeded",
    ]
    # every event carries exactly its documented payload
    for event in seen:
        assert set(event.data) == CATALOGUE[event.name], event
    assert [e.data["attempt"] for e in mine if e.name == "job.claimed"] == [1, 2, 3, 1]
    retry = mine[2].data
    assert (retry["error_code"], retry["stage"], retry["delay_s"]) == ("UPSTREAM_5XX", "call_llm", 0.01)
    failed = mine[6].data
    assert (failed["error_class"], failed["retryable"], failed["attempt"]) == ("UPSTREAM_5XX", True, 3)
    assert failed["upstream_status"] is None  # raised by the task, not an upstream's answer
    replayed = mine[8].data
    assert (replayed["by"], replayed["dead_letter_id"], replayed["replay_from"]) == ("ops", letter.id, "stage")
    assert mine[-1].data["duration_s"] >= 0
    assert [e.name for e in seen if e.name.startswith("worker.")] == ["worker.started", "worker.stopped"] * 2


def test_the_heartbeat_marks_exactly_the_old_run_lost_when_a_worker_holds_two_runs_of_a_job() -> None:
    """The old run was paused past its lease and the job came back to this
    same worker: both runs share a job id, only their leases differ."""
    app = App(store=MemoryStore())
    store = app.store
    second_started, release = threading.Event(), threading.Event()
    tokens: list[str] = []

    @app.task
    def comeback() -> None:
        tokens.append(str(current_job().lease_token))
        if len(tokens) == 1:
            store.jobs_finish([Requeue(current_job().lease)])  # its lease taken, as after a pause
            assert second_started.wait(5)  # this worker claims the job again meanwhile
        else:
            second_started.set()
        release.wait(10)

    lost: list[str] = []
    app.events.subscribe(lambda e: lost.append(e.data["lease_token"]), names=["job.lease_lost"])
    job = app.enqueue(comeback).job
    first_lost: list[float] = []

    def three_heartbeats_after_the_first_loss() -> bool:
        if lost and not first_lost:
            first_lost.append(time.monotonic())
        if first_lost and time.monotonic() - first_lost[0] > 0.7:
            release.set()
            return True
        return False

    try:
        asyncio.run(_run_until(app, three_heartbeats_after_the_first_loss, lease_ttl=timedelta(milliseconds=600)))
    finally:
        release.set()
    # The old run was marked lost once, at a heartbeat; the new one never was,
    # so it was kept alive, and its success is the job's.
    assert len(tokens) == 2 and lost == [tokens[0]]
    assert app.client.job(job.id).status is Status.SUCCEEDED
    assert [e.to_status for e in app.client.job_events(job.id)].count(Status.SUCCEEDED) == 1


def test_a_handler_that_raises_does_not_touch_the_job_and_unknown_names_are_refused() -> None:
    app = App(store=MemoryStore())
    app.task(lambda: "ok", name="ok")

    def broken(event: Event) -> None:
        raise RuntimeError("a metrics backend is down")

    app.events.subscribe(broken)
    job = app.enqueue("ok").job
    asyncio.run(_run_until(app, lambda: app.client.job(job.id).status is Status.SUCCEEDED))
    with pytest.raises(ConfigError, match=r"no such event: job\.finished"):
        app.events.subscribe(broken, names=["job.finished"])


def test_a_replay_that_fails_the_same_way_again_is_announced_as_escalated() -> None:
    app = App(store=MemoryStore())

    @app.task
    def post_comment() -> None:
        raise Permanent("the token was revoked", code="AUTH_DENIED")

    seen: list[Event] = []
    app.events.subscribe(seen.append, names=["job.dead_lettered", "job.escalated"])
    job = app.enqueue(post_comment).job
    asyncio.run(_run_until(app, lambda: len(seen) == 1))
    ops = app.admin(Actor.operator("ops"))
    (first,) = ops.dead_letters()
    ops.replay([first.id])
    asyncio.run(_run_until(app, lambda: len(seen) == 3))
    (second,) = [d for d in ops.dead_letters() if d.id != first.id]
    assert [(e.name, e.data["dead_letter_id"]) for e in seen] == [
        ("job.dead_lettered", first.id), ("job.dead_lettered", second.id), ("job.escalated", second.id)]
    assert [e.data.get("escalated") for e in seen[:2]] == [False, True]
    assert {e.data["job_id"] for e in seen} == {str(job.id)} and seen[2].data["error_class"] == "AUTH_DENIED"
