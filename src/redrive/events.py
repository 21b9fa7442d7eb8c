"""The event stream: one place where redrive announces what happened.

Metrics, notifiers, structured logs and tests subscribe to an application's
stream (``app.events``) instead of reading log text. The worker, the
scheduler, the outbox sender and the operator API all emit on it. Every
event is a small class below (``JobFailed``: ``event.task``,
``event.error_code``), with a name and a payload whose keys are its fields
(``CATALOGUE``); a handler subscribes by class or by name. Payloads hold
ids, names, codes, counts and durations, never job arguments or results.

Handlers run synchronously on the thread that emits (the worker's event
loop, a handler thread, a database thread): keep them quick and
thread-safe, and hand slow work to a queue of your own. A handler that
raises is logged and never affects the job.

The stream is per application, not process-wide: two apps in one process
have two streams.

The catalogue, with when each event fires, is ``docs/events.md``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

log = logging.getLogger("redrive.events")

# Not frozen: a frozen dataclass is three times slower to make, and a worker
# makes one a job. Handlers read events; none changes one.
@dataclass(slots=True)
class Event:
    """What happened: ``name`` (the catalogue's), the payload as attributes
    (``event.task``) or as a mapping (``event.data``), and ``at``, this
    process's wall clock, epoch seconds. One small class per kind below."""

    name: ClassVar[str] = ""
    keys: ClassVar[tuple[str, ...]] = ()  # the payload's, in order
    at: float = field(default_factory=time.time, kw_only=True)

    @property
    def data(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.keys}


EVENTS: dict[str, type[Event]] = {}
_E = TypeVar("_E", bound=type[Event])


def _kind(name: str) -> Callable[[_E], _E]:
    """Register an event class under its catalogue name."""

    def register(cls: _E) -> _E:
        cls.name = name
        cls.keys = tuple(f.name for f in fields(cls) if f.name != "at")
        EVENTS[name] = cls
        return cls

    return register


@_kind("worker.started")
@dataclass(slots=True)
class WorkerStarted(Event):
    worker: str
    queues: list[str]
    concurrency: int


@_kind("worker.stopped")
@dataclass(slots=True)
class WorkerStopped(Event):
    worker: str


@_kind("job.enqueued")
@dataclass(slots=True)
class JobEnqueued(Event):
    job_id: str
    task: str
    queue: str


@_kind("job.claimed")
@dataclass(slots=True)
class JobClaimed(Event):
    job_id: str
    task: str
    queue: str
    attempt: int
    worker: str
    lease_token: str
    wait_s: float


@_kind("job.succeeded")
@dataclass(slots=True)
class JobSucceeded(Event):
    job_id: str
    task: str
    queue: str
    attempt: int
    duration_s: float | None
    wait_s: float | None


@_kind("job.retry_scheduled")
@dataclass(slots=True)
class JobRetryScheduled(Event):
    job_id: str
    task: str
    queue: str
    attempt: int
    stage: str | None
    error_code: str
    upstream_status: int | None
    delay_s: float
    duration_s: float | None
    wait_s: float | None


@_kind("job.failed")
@dataclass(slots=True)
class JobFailed(Event):
    job_id: str
    task: str
    queue: str
    attempt: int
    stage: str | None
    error_code: str
    upstream_status: int | None
    error_class: str
    retryable: bool
    duration_s: float | None  # None: no run of this process timed it (the reclaim failed it)
    wait_s: float | None


@_kind("job.dead_lettered")
@dataclass(slots=True)
class JobDeadLettered(Event):
    job_id: str
    task: str
    queue: str
    stage: str | None
    error_class: str
    dead_letter_id: int | None
    escalated: bool


@_kind("job.escalated")
@dataclass(slots=True)
class JobEscalated(Event):
    job_id: str
    task: str
    queue: str
    error_class: str
    dead_letter_id: int | None


@_kind("job.held")
@dataclass(slots=True)
class JobHeld(Event):
    job_id: str
    task: str
    queue: str
    dependency: str


@_kind("job.lease_lost")
@dataclass(slots=True)
class JobLeaseLost(Event):
    job_id: str
    task: str
    queue: str
    lease_token: str
    worker: str


@_kind("job.reclaimed")
@dataclass(slots=True)
class JobReclaimed(Event):
    job_id: str
    task: str
    queue: str
    attempt: int
    status: str  # queued, or failed when no attempt was left


@dataclass(slots=True)
class _JobBy(Event):
    """An operator's (or owner's) action on a job: who did it."""

    job_id: str
    task: str
    queue: str
    by: str | None


@_kind("job.retried")
@dataclass(slots=True)
class JobRetried(_JobBy):
    pass


@_kind("job.replayed")
@dataclass(slots=True)
class JobReplayed(Event):
    job_id: str
    task: str
    queue: str
    by: str | None
    dead_letter_id: int
    replay_from: str


@_kind("job.resolved")
@dataclass(slots=True)
class JobResolved(Event):
    """An operator closed the job's dead letter without running it again."""

    job_id: str
    task: str
    queue: str
    by: str | None
    dead_letter_id: int


@_kind("job.cancel_requested")
@dataclass(slots=True)
class JobCancelRequested(_JobBy):
    pass


@_kind("job.cancelled")
@dataclass(slots=True)
class JobCancelled(_JobBy):
    pass


@_kind("job.revealed")
@dataclass(slots=True)
class JobRevealed(_JobBy):
    pass


@_kind("queue.paused")
@dataclass(slots=True)
class QueuePaused(Event):
    queue: str
    by: str | None


@_kind("queue.resumed")
@dataclass(slots=True)
class QueueResumed(Event):
    queue: str
    by: str | None


@_kind("breaker.changed")
@dataclass(slots=True)
class BreakerChanged(Event):
    dependency: str
    from_state: str
    to_state: str
    reason: str


@_kind("outbox.sent")
@dataclass(slots=True)
class OutboxSent(Event):
    job_id: str
    task: str
    queue: str
    key: str
    provider_id: str | None


@_kind("outbox.reconciled")
@dataclass(slots=True)
class OutboxReconciled(Event):
    job_id: str
    task: str
    queue: str
    key: str
    provider_id: str | None
    found: bool


@_kind("outbox.unconfirmed")
@dataclass(slots=True)
class OutboxUnconfirmed(Event):
    job_id: str
    task: str
    queue: str
    key: str


@_kind("notification.undelivered")
@dataclass(slots=True)
class NotificationUndelivered(Event):
    job_id: str  # the notification's own job, failed for good
    about: str  # what it told: failed, escalated, breaker, outbox, alert or message
    channels: str  # the channels that never took it, comma-separated


@_kind("schedule.fired")
@dataclass(slots=True)
class ScheduleFired(Event):
    schedule: str
    firings: int
    created: int
    duplicates: int


@_kind("alert.changed")
@dataclass(slots=True)
class AlertChanged(Event):
    rule: str
    state: str  # firing or resolved
    detail: str
    incident: str


@dataclass(slots=True)
class _WorkflowChanged(Event):
    """Told once, by the step's ending that did it: ``job_id`` is that step."""

    workflow_id: str
    workflow: str  # its name
    job_id: str


@_kind("workflow.succeeded")
@dataclass(slots=True)
class WorkflowSucceeded(_WorkflowChanged):
    """Its last step ended, and every step succeeded (or was a finally step's parent that did not)."""


@_kind("workflow.failed")
@dataclass(slots=True)
class WorkflowFailed(_WorkflowChanged):
    """Its last step ended, and a step failed for good."""


@_kind("workflow.cancelled")
@dataclass(slots=True)
class WorkflowCancelled(_WorkflowChanged):
    """Its last step ended, the workflow or a step cancelled and none failed."""


@_kind("workflow.blocked")
@dataclass(slots=True)
class WorkflowBlocked(_WorkflowChanged):
    """A step's failure (or cancel) blocked ``blocked`` steps after it: they wait until it is retried."""

    blocked: int


# The payload keys of each event, exactly: a test holds every emitted event to them.
CATALOGUE: Mapping[str, frozenset[str]] = {name: frozenset(cls.keys) for name, cls in EVENTS.items()}



def __getattr__(name: str) -> Any:
    # The stream that carries these events lives in redrive.stream; its old import path still works.
    if name in ("EventStream", "Handler"):
        from redrive import stream

        return getattr(stream, name)
    raise AttributeError(f"module 'redrive.events' has no attribute {name!r}")
