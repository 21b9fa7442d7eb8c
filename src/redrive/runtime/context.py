"""What a running handler can reach: its job, its stages, its failure context.

A handler runs with one ``HandlerRun`` in a context variable (copied into the thread
of a sync handler). ``stage`` runs a declared stage once per job: a stage with
saved output returns it without running again, so a retry or a replay resumes
at the stage that failed.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from redrive.core.checks import payload_problem
from redrive.core.classify import Classifier
from redrive.core.job import JSON, Job, StageDone
from redrive.core.progress import EVERY_S
from redrive.core.progress import progress as checked_progress
from redrive.core.stages import Stage, next_after, resume_at
from redrive.core.workflow import NewWorkflow, Upstream
from redrive.errors import CircuitOpen, ConfigError, LeaseLost
from redrive.runtime.breakers import BreakerGate
from redrive.runtime.interrupts import Interrupt
from redrive.store.port import Store
from redrive.stream import EventStream
from redrive.workflows import Workflow


@dataclass(eq=False, slots=True)  # one a job: slots make it and read it faster
class HandlerRun:
    job: Job
    stages: tuple[Stage, ...]
    is_async: bool
    store: Store  # fenced writes (stage output, outbox records) block
    classifier: Classifier
    checkpoint: dict[str, JSON] = field(default_factory=dict)
    stage_attempts: dict[str, int] = field(default_factory=dict)
    current: str | None = None  # the stage running now
    context: dict[str, JSON] = field(default_factory=dict)
    gate: BreakerGate | None = None  # the worker's, for guarded calls
    guarded: set[str] = field(default_factory=set)  # dependencies whose calls were wrapped
    events: EventStream = field(default_factory=EventStream)  # where the outbox sender announces
    interrupt: Interrupt | None = None  # how the worker stops this run
    spawner: Callable[[Workflow, Job], NewWorkflow] | None = None  # Client.plan_workflow: checks and builds a spawn
    spawned: list[NewWorkflow] | None = None  # created with the run's success (``spawn``)
    progress_at: float = 0.0  # when this run last wrote its progress (monotonic)

    def declared(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        names = ", ".join(s.name for s in self.stages)
        raise ConfigError(f"task {self.job.task!r} declares no stage {name!r} (it has: {names})")

    def failed_stage(self) -> Stage:
        """The stage a failure belongs to: the one running, else the next to run."""
        return self.declared(self.current) if self.current else resume_at(self.stages, self.checkpoint)

    def done(self, name: str, output: JSON) -> StageDone:
        problem = payload_problem(output, f"stage {name!r}'s output")
        if problem is not None:
            raise ConfigError(problem)
        self.stage_attempts[name] = self.stage_attempts.get(name, 0) + 1
        self.checkpoint[name] = output
        self.current = None
        return StageDone(self.job.lease, name, output, dict(self.stage_attempts),
                         next_after(self.stages, name))


CURRENT_RUN: ContextVar[HandlerRun | None] = ContextVar("redrive_current_run", default=None)


def handler_run() -> HandlerRun:
    run = CURRENT_RUN.get()
    if run is None:
        raise ConfigError("only available inside a running task (current_job, stage, add_context, deliver)")
    return run


def current_job() -> Job:
    """The job whose handler is calling; raises outside a handler."""
    return handler_run().job


def cancelled() -> bool:
    """True once the running job should stop: a cancel was asked, its time
    limit passed, or its worker is shutting down. A sync task that polls it
    and raises ``redrive.Cancelled`` ends the job cancelled; an async task is
    cancelled where it awaits and need not ask."""
    interrupt = handler_run().interrupt
    return interrupt is not None and interrupt.stopping


def add_context(**values: JSON) -> None:
    """Attach operational context (request ids, upstream ids) to the running
    job; it is redacted and kept in the job's dead letter if it fails for good."""
    problem = payload_problem(values, "add_context")
    if problem is not None:
        raise ConfigError(problem)
    handler_run().context.update(values)


def parents() -> list[Upstream]:
    """The running workflow step's parents, by step name and place in their
    fan-out: each one's ending (``status``) and result (None unless it
    succeeded). Empty for a job that is not a step, or a step without
    parents. It reads the store: in an async task, call it through
    ``await asyncio.to_thread(redrive.parents)``."""
    run = handler_run()
    return run.store.step_parents(job_id=run.job.id)


def parent_results() -> dict[str, JSON]:
    """The results of the running step's parents by step name: a step's
    result, or for a fan-out the list of its members' results in the order
    they were declared (None for a member that did not succeed)."""
    results: dict[str, JSON] = {}
    for parent in parents():
        if parent.position is None:
            results[parent.name] = parent.result
        else:
            results.setdefault(parent.name, []).append(parent.result)
    return results


def progress(fraction: float | None = None, *, done: int | None = None, total: int | None = None,
             note: str | None = None) -> bool:
    """Say how far the running job got: a ``fraction`` from 0 to 1, or
    ``done`` out of ``total``, and a short ``note``. The store keeps the
    latest, written at most once a second per job: a call within a second of
    the last write is checked and dropped (answers False), so a loop may
    call it for every item. ``app.progress(job_id)``, the API, the CLI and
    the job's page read it. In an async task, call it through
    ``await asyncio.to_thread(redrive.progress, ...)``: a write blocks."""
    run = handler_run()
    value = checked_progress(fraction, done=done, total=total, note=note)
    now = time.monotonic()
    if now - run.progress_at < EVERY_S:
        return False
    run.progress_at = now
    return run.store.progress_save(lease=run.job.lease, progress=value)


def spawn(workflow: Workflow) -> UUID:
    """Create ``workflow`` (a ``redrive.Workflow``: children, and steps to run
    after them) when the running job succeeds, in the transaction that ends
    it: a run that fails, retries or loses its lease creates nothing, so a
    retry of this job never makes its children twice, and no worker slot
    waits on them. Its steps are checked now (a bad argument raises here);
    answers the id the workflow will have. It belongs to this job's owner
    unless it names one."""
    run = handler_run()
    if not isinstance(workflow, Workflow):
        raise ConfigError("spawn() takes a redrive.Workflow: its children and the steps after them")
    if run.spawner is None:
        raise ConfigError("spawn() needs a worker (or the testing kit's drain) to run the job")
    new = run.spawner(workflow, run.job)
    if run.spawned is None:
        run.spawned = []
    run.spawned.append(new)
    return new.id


def stage(name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` as the declared stage ``name`` and save its
    output (JSON), fenced on the job's lease. If the stage already finished in an
    earlier attempt, return its saved output without calling ``fn``.

    In an async task, ``await`` it (``fn`` may be sync or async)."""
    run = handler_run()
    declared = run.declared(name)
    if run.is_async:
        return _stage_async(run, declared, fn, args, kwargs)
    if name in run.checkpoint:
        return run.checkpoint[name]
    run.current = name
    with _limited(run, declared):
        output = fn(*args, **kwargs)
    _save(run, run.done(name, output))
    return output


async def _stage_async(run: HandlerRun, declared: Stage, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    name = declared.name
    if name in run.checkpoint:
        return run.checkpoint[name]
    run.current = name
    with _limited(run, declared):
        output = fn(*args, **kwargs)
        if inspect.isawaitable(output):
            output = await output
    await asyncio.to_thread(_save, run, run.done(name, output))
    return output


@contextmanager
def _limited(run: HandlerRun, declared: Stage) -> Iterator[None]:
    """The stage's own time limit, while it runs (the task's goes on too)."""
    if declared.timeout is None or run.interrupt is None:
        yield
        return
    limit = run.interrupt.limit(declared.timeout.total_seconds(), f"stage {declared.name}")
    try:
        yield
    finally:
        run.interrupt.unlimit(limit)


@contextmanager
def guarded(dependency: str) -> Iterator[None]:
    """Wrap one call to a declared dependency in its shared breaker:

        with guarded("gateway"):
            response = httpx.post(...)

    If the breaker is open the block does not run: the job is held (or, in
    fail-fast mode, fails with the dependency's code). The call's result is
    the breaker's evidence (a failure whose code is the dependency's, or a
    slow call, counts against it), and the job's own outcome no longer counts for that dependency."""
    run = handler_run()
    if run.gate is None:
        raise ConfigError("guarded() needs a worker whose app declares dependencies")
    run.gate.dependency(dependency)  # an unknown name is a ConfigError here
    run.guarded.add(dependency)
    if not run.gate.admit_now(dependency):
        raise CircuitOpen(f"dependency {dependency} is unavailable (circuit open)", dependency=dependency)
    started = time.monotonic()
    try:
        yield
    except Exception as exc:
        failure = run.classifier.exception(exc, now=datetime.now(UTC))
        run.gate.note(dependency, run.gate.verdict(dependency, failure, run.classifier), time.monotonic() - started)
        raise
    run.gate.note(dependency, True, time.monotonic() - started)


def _save(run: HandlerRun, item: StageDone) -> None:
    if item.lease not in run.store.stages_save(items=[item]):
        raise LeaseLost(f"job {run.job.id} lost its lease during stage {item.stage!r}")

