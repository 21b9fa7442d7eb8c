"""redrive: a reliable background-job engine.

Declare tasks on an ``App``; enqueue through its ``client`` (``app.enqueue``);
run workers on it (``Worker(app.client)`` or ``redrive worker``); operate as
an ``Actor`` through ``Admin``. Only the names in ``redrive.__all__`` are the
public surface; the modules behind them may change.

The store classes load on first use (PEP 562), so ``import redrive`` loads no
database driver (an application on SQLite never imports psycopg) and no store
it does not use.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from redrive.admin import Actor, Admin, BreakerStatus, Bulk, Replay, Resolve
from redrive.app import App
from redrive.client import Client, JobRequest
from redrive.core.backoff import AdditiveJitter, Backoff, Fixed, FullJitter, ProportionalJitter
from redrive.core.breaker import BreakerMode, BreakerPolicy
from redrive.core.classify import DEFAULT_CLASSIFIER, Classifier, Failure, Kind
from redrive.core.ids import job_id_for
from redrive.core.job import DeadLetter, EnqueueResult, Job, JobEvent
from redrive.core.limits import Rate
from redrive.core.outbox import OutboxRow, OutboxStatus
from redrive.core.progress import Progress
from redrive.core.schedule import Firing, Schedule
from redrive.core.stages import Stage
from redrive.core.states import Status
from redrive.core.taxonomy import DEFAULT_TAXONOMY, ErrorCode, Taxonomy
from redrive.core.workflow import Policy, Upstream, WorkflowCreated, WorkflowState, WorkflowStatus
from redrive.declarations import Call, Dependency, Registry, Task
from redrive.errors import (
    ArgumentsNotSerializable,
    Cancelled,
    CircuitOpen,
    ConfigError,
    DeadLetterNotFound,
    Forbidden,
    IdempotencyKeyReused,
    IllegalTransition,
    JobError,
    JobNotFound,
    JobStateError,
    LeaseLost,
    NotDelivered,
    Permanent,
    RedriveError,
    ResultCancelled,
    ResultFailed,
    ResultTimeout,
    SchemaOutdated,
    Snooze,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreTimeout,
    StoreUnavailable,
    Transient,
    UnknownDependency,
    UnknownTask,
    WorkflowNotFound,
)
from redrive.runtime.context import (
    add_context,
    cancelled,
    current_job,
    guarded,
    parent_results,
    parents,
    progress,
    spawn,
    stage,
)
from redrive.runtime.inprocess import InProcessRetry
from redrive.runtime.outbox import Delivery, Intent, deliver
from redrive.runtime.plugins import Beside, Plugin
from redrive.runtime.scheduler import Scheduler
from redrive.runtime.worker import Worker
from redrive.runtime.writes import write_phase
from redrive.settings import Settings
from redrive.store.port import Store
from redrive.store.url import open_store
from redrive.workflows import After, StepRef, Workflow

if TYPE_CHECKING:
    from redrive.store.memory import MemoryStore
    from redrive.store.postgres.store import PostgresStore
    from redrive.store.sqlite.store import SQLiteStore

# Public names that load their module on first use: name -> module.
_LAZY = {
    "MemoryStore": "redrive.store.memory",
    "PostgresStore": "redrive.store.postgres.store",
    "SQLiteStore": "redrive.store.sqlite.store",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value  # once loaded, an ordinary attribute
        return value
    if name in ("JobFailed", "JobCancelled"):  # the exceptions' old names (ResultFailed, ResultCancelled)
        return getattr(import_module("redrive.errors"), name)
    raise AttributeError(f"module 'redrive' has no attribute {name!r}")


__all__ = [
    "Actor",
    "AdditiveJitter",
    "Admin",
    "After",
    "App",
    "ArgumentsNotSerializable",
    "Backoff",
    "Beside",
    "BreakerMode",
    "BreakerPolicy",
    "BreakerStatus",
    "Bulk",
    "Call",
    "Cancelled",
    "CircuitOpen",
    "Classifier",
    "Client",
    "ConfigError",
    "DEFAULT_CLASSIFIER",
    "DEFAULT_TAXONOMY",
    "DeadLetter",
    "DeadLetterNotFound",
    "Delivery",
    "Dependency",
    "EnqueueResult",
    "ErrorCode",
    "Failure",
    "Firing",
    "Fixed",
    "Forbidden",
    "FullJitter",
    "IdempotencyKeyReused",
    "IllegalTransition",
    "InProcessRetry",
    "Intent",
    "Job",
    "JobError",
    "JobEvent",
    "JobNotFound",
    "JobRequest",
    "JobStateError",
    "Kind",
    "LeaseLost",
    "MemoryStore",
    "NotDelivered",
    "OutboxRow",
    "OutboxStatus",
    "Permanent",
    "Plugin",
    "Policy",
    "PostgresStore",
    "Progress",
    "ProportionalJitter",
    "Rate",
    "RedriveError",
    "Registry",
    "Replay",
    "Resolve",
    "ResultCancelled",
    "ResultFailed",
    "ResultTimeout",
    "SQLiteStore",
    "Schedule",
    "Scheduler",
    "SchemaOutdated",
    "Settings",
    "Snooze",
    "Stage",
    "Status",
    "StepRef",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoreFull",
    "StoreTimeout",
    "StoreUnavailable",
    "Task",
    "Taxonomy",
    "Transient",
    "UnknownDependency",
    "UnknownTask",
    "Upstream",
    "Worker",
    "Workflow",
    "WorkflowCreated",
    "WorkflowNotFound",
    "WorkflowState",
    "WorkflowStatus",
    "add_context",
    "cancelled",
    "current_job",
    "deliver",
    "guarded",
    "job_id_for",
    "open_store",
    "parent_results",
    "parents",
    "progress",
    "spawn",
    "stage",
    "write_phase",
]
