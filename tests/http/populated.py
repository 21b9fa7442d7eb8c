"""A database with one of everything a page or a route can show, made
through redrive's own calls: jobs in every status (with and without
owners, with stages and a note of context; a workflow's pending and
blocked steps), dead letters open, escalated,
replayed and resolved, a plain worker and a supervisor with worker
processes (one with an orphaned thread) and replacements, schedules (one
paused, one no longer declared), breakers closed, open and half-open,
an alert firing, outbox rows, audit entries, a paused queue, and a queue of
thousands (past the exact counts: PostgreSQL estimates there). The contract
tests call every read route and page against it (test_populated.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from redrive import Actor, App, Dependency, JobRequest, Permanent, Workflow
from redrive.core.breaker import Breaker, Call, State
from redrive.core.job import StageDone
from redrive.core.outbox import OutboxChange, OutboxStatus
from redrive.core.progress import progress
from redrive.core.transitions import Completion, FailNow, RetryLater
from redrive.store.port import WorkerReport
from redrive.store.reads import EXACT_UP_TO

THOUSANDS = 3 * EXACT_UP_TO  # waiting in one queue: past the exact counts
WORKER = "host-a:101:plain1"
SUPERVISOR = "host-b:200"
CHILDREN = (f"{SUPERVISOR}.c0ffee", f"{SUPERVISOR}.beef01")
BREAKERS = {"mailer": State.CLOSED, "converter": State.OPEN, "gateway": State.HALF_OPEN}


def make_app(url: str) -> App:
    app = App(url, dependencies=[Dependency(name) for name in BREAKERS])

    @app.task
    def greet(name: str) -> str:
        return f"hello {name}"

    @app.task
    def fail(reason: str) -> None:
        raise Permanent(reason)

    @app.task(stages=["fetch", "llm"], dependencies=["mailer"])
    def review(key: str) -> str:
        return key

    app.schedule("digest", "greet", "0 9 * * *", timezones=["Europe/Paris", "America/New_York"],
                 kwargs={"name": "digest"})
    app.schedule("weekly", "greet", "0 8 * * 1", kwargs={"name": "weekly"})
    return app


@dataclass
class Populated:
    """What was made, for the routes that take an id or a name."""

    jobs: dict[str, UUID] = field(default_factory=dict)  # by what it shows: "succeeded", "alice's queued", ...
    letters: dict[str, int] = field(default_factory=dict)  # by state
    workflows: dict[str, UUID] = field(default_factory=dict)  # by status
    breakers: tuple[str, ...] = tuple(BREAKERS)


def populate(app: App) -> Populated:
    store, made = app.store, Populated()
    ops = app.admin(Actor.operator("ops"))
    ttl = timedelta(minutes=30)

    def enqueue(label: str, task: str = "greet", **options: Any) -> UUID:
        job = app.enqueue(task, args=[label], **options).job
        made.jobs[label] = job.id
        return job.id

    def running(queue: str, *labels: str) -> dict[str, Any]:
        """The jobs of ``labels`` (alone in ``queue``), claimed by the plain worker."""
        claimed = store.jobs_claim(queues=[queue], limit=len(labels), worker_id=WORKER, lease_ttl=ttl)
        by_id = {job.id: job for job in claimed}
        assert set(by_id) == {made.jobs[label] for label in labels}, (queue, labels)
        return {label: by_id[made.jobs[label]] for label in labels}

    # Jobs in every status, with and without owners
    app.enqueue_many([JobRequest("greet", args=[f"n{n}"], queue="bulk") for n in range(THOUSANDS)])
    enqueue("scheduled", delay=timedelta(hours=1))
    enqueue("queued")
    enqueue("alice's queued", owner="alice")
    enqueue("cancelled", owner="bob")
    ops.cancel(made.jobs["cancelled"])
    for label in ("running", "alice's running", "succeeded", "failed", "retrying", "escalated", "resolved"):
        enqueue(label, queue="work", owner="alice" if label.startswith("alice") else None)
    enqueue("staged", task="review", queue="staged", owner="carol")
    held = running("work", "running", "alice's running", "succeeded", "failed", "retrying", "escalated", "resolved")
    (staged,) = running("staged", "staged").values()
    store.stages_save(items=[StageDone(staged.lease, "fetch", {"text": "fetched"}, {"fetch": 1}, "llm")])
    store.jobs_finish([
        Completion(held["succeeded"].lease, {"greeting": "hello", "token": "sk-live-0123456789abcdef"}),
        FailNow(held["failed"].lease, "NOT_FOUND", "no such user", error_class="NOT_FOUND",
                context={"stage": "greet", "attempt": 1}, stack="Traceback (most recent call last): ..."),
        RetryLater(held["retrying"].lease, timedelta(minutes=5), "RATE_LIMITED", "slow down"),
        FailNow(held["escalated"].lease, "AUTH_DENIED", "denied", error_class="AUTH_DENIED"),
        FailNow(held["resolved"].lease, "BAD_INPUT", "bad input", error_class="BAD_INPUT"),
    ])
    letters = {letter.job_id: letter for letter in ops.dead_letters(limit=100)}
    made.letters["open"] = letters[made.jobs["failed"]].id
    ops.note(made.letters["open"], "looking into it")
    (resolved,) = ops.resolve([letters[made.jobs["resolved"]].id], note="not worth a rerun")
    made.letters["resolved"] = resolved.letter.id
    # An escalated letter: replayed (its first letter: replayed), then failed again the same way
    (replay,) = ops.replay([letters[made.jobs["escalated"]].id])
    made.letters["replayed"] = replay.letter.id
    (again,) = store.jobs_claim(queues=["work"], limit=1, worker_id=WORKER, lease_ttl=ttl)
    store.jobs_finish([FailNow(again.lease, "AUTH_DENIED", "denied again", error_class="AUTH_DENIED")])
    made.letters["escalated"] = next(d.id for d in ops.dead_letters(limit=100)
                                     if d.job_id == made.jobs["escalated"] and d.escalated)
    ops.reveal(made.jobs["succeeded"])  # on the job's audit trail

    # A workflow whose first step failed: the second blocked, the third pending behind it
    step = app.registry.task("greet").options(queue="flow")
    flow = app.create_workflow(Workflow.chain("flow", [step.call(n) for n in ("first", "blocked", "pending")],
                                              owner="alice"))
    made.workflows["blocked"] = flow.id
    made.jobs["blocked"], made.jobs["pending"] = flow.steps["greet-2"][0], flow.steps["greet-3"][0]
    (first,) = store.jobs_claim(queues=["flow"], limit=1, worker_id=WORKER, lease_ttl=ttl)
    store.jobs_finish([FailNow(first.lease, "NOT_FOUND", "no such user", error_class="NOT_FOUND")])
    # A workflow a job's success spawned (redrive.spawn): its pages lead back to that job
    app.registry.task("greet").options(queue="spawning", owner="alice").enqueue("spawner")
    (spawner,) = store.jobs_claim(queues=["spawning"], limit=1, worker_id=WORKER, lease_ttl=ttl)
    kids = Workflow("kids")
    kids.map([step.call("x"), step.call("y")], name="greet")
    store.jobs_finish([Completion(spawner.lease, None, {}, (app.client.plan_workflow(kids, spawner),))])
    made.workflows["spawned"] = next(w.id for w in ops.workflows() if w.spawned_by == spawner.id)
    made.jobs["spawner"] = spawner.id

    # The running job says how far it got
    assert store.progress_save(lease=held["running"].lease, progress=progress(done=3, total=10, note="page 3"))

    # Outbox rows: one sent and recorded, one that failed for good
    for key, change in (("mail:1", OutboxChange(OutboxStatus.SENT, provider_id="msg-1", notified=True)),
                        ("mail:2", OutboxChange(OutboxStatus.FAILED, error_code="BOUNCED", error_message="bounced"))):
        assert store.outbox_open(lease=held["running"].lease, key=key, token=f"tok-{key}") is not None
        assert store.outbox_update(lease=held["running"].lease, key=key, change=change) is not None

    # The registry: a plain worker, a supervisor and its two worker processes (one with an orphaned thread)
    store.worker_report(report=WorkerReport(WORKER, "host-a", 101, ["work", "staged"], 4, "1.0", running=3,
                                            jobs_run=12, memory_bytes=50 << 20))
    store.worker_report(report=WorkerReport(
        SUPERVISOR, "host-b", 200, ["default"], 0, "1.0", running=0, memory_bytes=30 << 20, children=2, restarts=3,
        restarts_by={"hard_time_limit": 1, "recycled": 1, "died": 1},
        replaced=[{"pid": 198, "worker": f"{SUPERVISOR}.aaaaaa", "why": "recycled: it ran 100 jobs",
                   "reason": "recycled", "at": datetime.now(UTC).isoformat(timespec="seconds")}]))
    for n, child in enumerate(CHILDREN):
        store.worker_report(report=WorkerReport(child, "host-b", 201 + n, ["default"], 2, "1.0", running=0,
                                                jobs_run=n, orphaned=n, supervisor=SUPERVISOR))

    # Breakers in each state
    for name, state in BREAKERS.items():
        def change(b: Breaker, now: float, state: State = state) -> Breaker:
            calls = tuple(Call(now - n, ok=n % 3 != 0) for n in range(6))
            if state is State.CLOSED:
                return replace(b, window=calls)
            opened = b._to(State.OPEN, now - 60, "50% of 6 calls failed")
            return opened if state is State.OPEN else opened._to(State.HALF_OPEN, now, "probe answered")
        store.breaker_update(name=name, change=change)
    ops.open_breaker("converter")  # forced by an operator too: on the breaker's history

    # Schedules: one fired, one paused, one no longer declared
    now = store.now()
    store.schedule_checkpoint(name="digest", now=now - timedelta(days=1))
    store.schedule_advance(name="digest", to=now)
    ops.pause_schedule("weekly")
    store.schedule_checkpoint(name="retired", now=now - timedelta(days=3))

    # A paused queue, an alert firing, and what operators did (the audit trail)
    ops.pause_queue("paused")
    store.alert_fire(rule="deep_queue", incident="1", detail=f"queue bulk holds {THOUSANDS} queued jobs")
    return made
