"""Run one handler and turn however it ended into an Execution; never raises."""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import inspect
import json
import logging
import traceback
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from random import Random
from typing import Any

from redrive.core.backoff import FullJitter
from redrive.core.checks import payload_problem
from redrive.core.classify import Classifier, Failure, describe, one_line
from redrive.core.job import JSON, Job
from redrive.core.outcome import Execution, Failed, Retry, Snoozed, Stopped, Succeeded
from redrive.core.redact import redact, redact_text
from redrive.core.retry import after_failure
from redrive.core.stages import Stage
from redrive.core.states import Status
from redrive.core.transitions import SNOOZE_LIMIT, SNOOZED, TIMEOUT
from redrive.core.workflow import NewWorkflow
from redrive.declarations import Task
from redrive.errors import Cancelled, CircuitOpen, LeaseLost, Permanent, Snooze, Transient
from redrive.runtime.context import CURRENT_RUN, HandlerRun
from redrive.runtime.interrupts import Interrupt
from redrive.runtime.stacks import STACK_LIMIT, task_stack
from redrive.runtime.threads import DaemonThreadPool
from redrive.store.port import Store
from redrive.stream import EventStream
from redrive.workflows import Workflow

log = logging.getLogger("redrive.worker")

UNKNOWN_TASK = "UNKNOWN_TASK"
BUG = "BUG"  # what the engine records when it cannot tell more
RESULT_NOT_JSON = "RESULT_NOT_JSON"
_UNKNOWN_TASK_BACKOFF = FullJitter(initial=timedelta(seconds=5), cap=timedelta(minutes=5))
# Most runs return nothing and say nothing more: one Execution serves them all
# (it is frozen, and nothing changes the dicts it holds).
_RETURNED_NOTHING = Execution(Succeeded(None))
# A run that lost its lease: a worker writes nothing for it (what it would
# come to, were anything written, is a retry: the testing kit writes that).
_DROPPED = Execution(Retry(timedelta(0), Failure(code="LEASE_LOST", retryable=True, message="the run lost its lease")),
                     lease_lost=True)


def stages_of(task: Task[Any, Any], job: Job) -> tuple[Stage, ...]:
    """A plain task is a one-stage pipeline with the job's budget and the task's backoff."""
    if task.stages:
        return task.stages
    # The same few pipelines serve every job of a plain task. Keyed by the
    # backoff's identity, not its value (a dataclass hashes in Python, on
    # every job): the Stage kept holds the backoff, so while its entry is
    # here no other object can have its id.
    key = (task.name, job.max_attempts, id(task.backoff))
    found = _ONE_STAGE.get(key)
    if found is None:
        if len(_ONE_STAGE) >= 1024:
            _ONE_STAGE.clear()
        found = _ONE_STAGE[key] = (Stage(task.name, max_attempts=job.max_attempts, backoff=task.backoff),)
    return found


_ONE_STAGE: dict[tuple[str, int, int], tuple[Stage, ...]] = {}


async def execute(
    task: Task[Any, Any] | None,
    job: Job,
    *,
    classifier: Classifier,
    threads: DaemonThreadPool,
    rng: Random,
    store: Store,
    interrupt: Interrupt,
    gate: Any = None, events: EventStream | None = None, supervised: bool = False,
    spawner: Callable[[Workflow, Job], NewWorkflow] | None = None,
) -> Execution:
    """Whatever the task does, its ending becomes this job's outcome, and
    nothing more: not the worker's, not another job's."""
    # One coroutine, not a guard around another: a worker awaits this for
    # every job, and each layer of coroutine cost it about a microsecond.
    try:
        if task is None:
            return _unknown_task(job, rng)
        if interrupt.cancel_by is not None:  # asked before the body started
            return Execution(Stopped(interrupt.cancel_by))
        classifier = task.classifier or classifier
        is_async = task.is_async
        # Every field, in order, none by keyword: keywords and default
        # factories made this 0.9 µs a job instead of 0.4.
        run = HandlerRun(job, stages_of(task, job), is_async, store, classifier, dict(job.checkpoint),
                         dict(job.stage_attempts), None, {}, gate, set(), events or EventStream(), interrupt,
                         spawner)
        token = CURRENT_RUN.set(run)
        interrupt.in_handler = True
        # A hard limit is the supervisor's to keep (it kills the process); a
        # worker alone keeps it as it keeps the soft one, abandoning the run.
        hard = None if supervised else task.hard_timeout
        if task.timeout is not None or hard is not None:
            limit = min(t for t in (task.timeout, hard) if t is not None)
            interrupt.limit(limit.total_seconds(), f"task {task.name}")
        try:
            # A retry after a stalled status write may find the work done (the converter's rule: no second conversion).
            found = (await _call(task.already_done, job, threads, inspect.iscoroutinefunction(task.already_done))
                     if task.already_done else None)
            if found is not None:
                result = found
            elif is_async:  # (awaited here, not through _call: one coroutine fewer a job)
                result = await task.fn(*job.args, **job.kwargs)
            else:
                result = await _call(task.fn, job, threads, is_async)
        except asyncio.CancelledError as exc:
            if not interrupt.interrupted:
                raise  # the worker is shutting down: not an outcome
            _uncancel()
            ended = _stopped(exc, run, rng)
            _let_go(exc)
            return replace(ended, guarded=frozenset(run.guarded), told=_told(run))
        except Snooze as exc:
            _let_go(exc)
            return replace(await _snoozed(exc, run, task, rng), guarded=frozenset(run.guarded), told=_told(run))
        except (CircuitOpen, LeaseLost) as exc:
            _let_go(exc)
            return _not_the_tasks(exc, run)
        except BaseException as exc:
            # However a stopped run ends (our Cancelled, or an error its stopping
            # caused), it ends as what stopped it. sys.exit() and KeyboardInterrupt
            # from task code are the job's failure: a task may not stop its worker.
            stopped = isinstance(exc, Cancelled) or interrupt.interrupted
            outcome = _stopped(exc, run, rng) if stopped else _failed(exc, run, classifier, rng)
            _let_go(exc)
            return replace(outcome, guarded=frozenset(run.guarded), told=_told(run))
        finally:
            interrupt.in_handler = False
            interrupt.clear()
            CURRENT_RUN.reset(token)
        return _returned(result, found is not None, run)
    except asyncio.CancelledError:
        raise  # the worker is shutting down
    except BaseException as exc:  # an engine bug: recorded on the job rather than lost with it
        log.exception("job %s (%s): its ending could not be recorded as it was", job.id, job.task)
        failure = Failure(code=BUG, retryable=False, message=one_line(f"redrive could not record how it ended: "
                                                                       f"{describe(exc)}"))
        return Execution(Failed(failure))


def _not_the_tasks(exc: CircuitOpen | LeaseLost, run: HandlerRun) -> Execution:
    """Ends that are no failure of the task's. A guarded call found its
    breaker open: the job goes back, held by it. A fenced write of the run's
    was refused (LeaseLost): another worker may run the job by now, so
    nothing is written, as when the heartbeat finds a lease gone; should the
    lease still be this run's, it expires and the job runs again."""
    if isinstance(exc, LeaseLost):
        return _DROPPED
    return Execution(Retry(timedelta(0), Failure(code=exc.code, retryable=True, message=exc.message)),
                     held_by=exc.dependency, guarded=frozenset(run.guarded), told=_told(run))


def _unknown_task(job: Job, rng: Random) -> Execution:
    # Another deploy may know this task: let it come back rather than lose it.
    failure = Failure(code=UNKNOWN_TASK, retryable=True, message=f"no task named {job.task!r} in this worker")
    unknown = Stage(job.task, max_attempts=job.max_attempts, backoff=_UNKNOWN_TASK_BACKOFF)
    return Execution(after_failure(failure, stage=unknown, stage_attempts=job.attempts,
                                   attempts=job.attempts, max_attempts=job.max_attempts, rng=rng))


def _returned(result: Any, skipped: bool, run: HandlerRun) -> Execution:
    """A run whose handler returned ``result`` (or was found done already: ``skipped``)."""
    try:  # most jobs return nothing: no encoder to run
        problem = payload_problem(result, "the result") if result is not None else None
    except Exception as exc:  # an object that breaks its encoder
        problem = f"the result is not JSON: {describe(exc)}"
    if problem is not None:
        failure = Failure(code=RESULT_NOT_JSON, retryable=False, message=one_line(problem))
        return Execution(Failed(failure), context=_context(run, failure), told=_told(run))
    # A run that finished its work succeeded, even if a cancel came too late to stop it.
    if result is None and not skipped and not run.guarded and not run.context and not run.spawned:
        return _RETURNED_NOTHING
    return Execution(Succeeded(result), guarded=frozenset(run.guarded), skipped=skipped, told=_told(run),
                     spawned=tuple(run.spawned or ()))


async def _call(fn: Callable[..., Any], job: Job, threads: DaemonThreadPool, is_async: bool) -> Any:
    """Run a task's function with the job's arguments: async ones on the loop,
    sync ones on a thread that sees the running job."""
    if is_async:
        return await fn(*job.args, **job.kwargs)
    context = contextvars.copy_context()
    return await threads.run(lambda: context.run(fn, *job.args, **job.kwargs), what=f"job {job.id} ({job.task})",
                             key=job.lease_token)


def _let_go(exc: BaseException) -> None:
    """Once a run's error is read (its stack is text by now), what its
    finished frames held goes: the task's locals (a buffer, a response), and
    with them the reference cycles an error makes through the frames it
    passed (one whose frame keeps the error, or a future that does), which
    only the garbage collector could free otherwise. The frame still running
    (this one) is left as it is."""
    traceback.clear_frames(exc.__traceback__)


def _uncancel() -> None:
    # The run's task was cancelled to stop the handler; the worker's own
    # awaits after it (the outcome write) must not see it as cancelled.
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


async def _snoozed(exc: Snooze, run: HandlerRun, task: Task[Any, Any], rng: Random) -> Execution:
    """Back to the queue after the delay asked, no attempt spent; past the
    task's most snoozes, a failure for good (``SNOOZE_LIMIT``). The count is
    read off the job's history (off the event loop): only a snoozing job pays."""
    done = await asyncio.to_thread(_snoozes, run.store, run.job.id)
    if done >= task.max_snoozes:
        failure = Failure(code=SNOOZE_LIMIT, retryable=False,
                          message=f"task {task.name} snoozed {done} times, the most it allows (max_snoozes)")
        return _after(failure, run, rng, None)
    return Execution(Snoozed(exc.delay, done + 1))


def _snoozes(store: Store, job_id: Any) -> int:
    """The job's snoozes so far: each numbers itself in its event, so the
    latest among the newest events says, and only a history without one
    there is read whole (a job that has not snoozed lately, or ever)."""
    def counted(events: list[Any]) -> int | None:
        return next((int(e.meta.get("snoozes", 0)) for e in reversed(events)
                     if e.to_status is Status.QUEUED and e.meta.get("reason") == SNOOZED), None)

    recent = store.job_events_list(job_id=job_id, newest=_RECENT)
    found = counted(recent)
    if found is None and len(recent) == _RECENT:
        found = counted(store.job_events_list(job_id=job_id))
    return found or 0


_RECENT = 16


def _stopped(exc: BaseException, run: HandlerRun, rng: Random) -> Execution:
    """A run that was cancelled, or ran past its time limit."""
    interrupt = run.interrupt
    assert interrupt is not None
    if interrupt.cancel_by is not None or interrupt.timed_out is None:
        reason = one_line(str(exc)) if isinstance(exc, Cancelled) and str(exc) else None
        return Execution(Stopped(interrupt.cancel_by or "task", reason))
    limit = interrupt.timed_out
    failure = Failure(code=TIMEOUT, retryable=True,
                      message=f"{limit.what} ran past its time limit of {limit.seconds:g}s")
    stack = redact_text(task_stack(exc))[-STACK_LIMIT:] if run.is_async else None
    return _after(failure, run, rng, stack)


def _failed(exc: BaseException, run: HandlerRun, classifier: Classifier, rng: Random) -> Execution:
    job = run.job
    stack = redact_text(task_stack(exc))[-STACK_LIMIT:]
    if not isinstance(exc, Exception):  # sys.exit(), KeyboardInterrupt: a bug in the task, not a classified failure
        failure = Failure(code=classifier.unclassified, retryable=False,
                          message=one_line(f"{describe(exc)} (raised by the task; it cannot stop the worker)"))
        log.error("job %s (%s) raised %s: recorded as its failure, the worker goes on",
                  job.id, job.task, type(exc).__name__)
        return _after(failure, run, rng, stack)
    try:
        failure = classifier.exception(exc, now=datetime.now(UTC))
    except Exception:
        # A classifier that breaks must not lose the job: record it as unclassified.
        log.exception("job %s (%s): the classifier raised; recording %s", job.id, job.task,
                      classifier.unclassified)
        failure = Failure(code=classifier.unclassified, retryable=False, message=one_line(describe(exc)))
    failure = replace(failure, message=redact_text(failure.message))
    if failure.code == classifier.unclassified and not isinstance(exc, (Transient, Permanent)):
        log.error("job %s (%s) raised an unclassified error:\n%s", job.id, job.task, stack)
    return _after(failure, run, rng, stack)


def _after(failure: Failure, run: HandlerRun, rng: Random, stack: str | None) -> Execution:
    """The failed attempt's stage spends one attempt; its policy says retry or fail."""
    job = run.job
    stage = run.failed_stage()
    run.stage_attempts[stage.name] = run.stage_attempts.get(stage.name, 0) + 1
    outcome = after_failure(failure, stage=stage, stage_attempts=run.stage_attempts[stage.name],
                            attempts=job.attempts, max_attempts=job.max_attempts, rng=rng)
    final = isinstance(outcome, Failed)
    return Execution(outcome, stage=stage.name, stage_attempts=dict(run.stage_attempts),
                     stack=stack if final else None,
                     context=_context(run, failure) if final else {})


def _told(run: HandlerRun) -> dict[str, JSON]:
    """What the task said of its run (``add_context``), redacted, for the ending's event."""
    return redact(run.context) if run.context else {}


def _context(run: HandlerRun, failure: Failure) -> dict[str, JSON]:
    """What an operator needs to triage, and nothing a payload could leak:
    ids, counts and hashes, never the arguments themselves."""
    payload = json.dumps([run.job.args, run.job.kwargs], sort_keys=True, default=str)
    context: dict[str, JSON] = {
        "stage": run.failed_stage().name,
        "attempt": run.job.attempts,
        "stage_attempts": dict(run.stage_attempts),
        "payload_sha256": hashlib.sha256(payload.encode()).hexdigest()[:16],
    }
    if failure.upstream_status is not None:
        context["upstream_status"] = failure.upstream_status
    if failure.exception is not None:
        context["exception"] = failure.exception
    context.update(redact(run.context))
    return context
