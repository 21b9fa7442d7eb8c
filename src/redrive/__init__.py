"""redrive: a reliable background-job engine.

Declare tasks on an ``App``, enqueue jobs, run ``Worker``s (or ``redrive worker``).
"""

from redrive.app import App, BreakerStatus, Dependency, JobRequest, Replay, Task
from redrive.core.breaker import BreakerMode, BreakerPolicy
from redrive.core.backoff import AdditiveJitter, Backoff, Fixed, FullJitter, ProportionalJitter
from redrive.core.classify import DEFAULT_CLASSIFIER, Classifier, Failure, Kind
from redrive.core.ids import job_id_for
from redrive.core.job import DeadLetter, EnqueueResult, Job, JobEvent
from redrive.core.outbox import OutboxRow, OutboxStatus
from redrive.core.schedule import Firing, Schedule
from redrive.core.stages import Stage
from redrive.core.states import Status
from redrive.core.taxonomy import DEFAULT_TAXONOMY, ErrorCode, Taxonomy
from redrive.errors import (
    ArgumentsNotSerializable,
    CircuitOpen,
    ConfigError,
    DeadLetterNotFound,
    Forbidden,
    IdempotencyKeyReused,
    IllegalTransition,
    JobError,
    JobNotFound,
    LeaseLost,
    Permanent,
    RedriveError,
    SchemaOutdated,
    StoreBusy,
    StoreError,
    StoreUnavailable,
    Transient,
    UnknownDependency,
    UnknownTask,
)
from redrive.runtime.context import add_context, current_job, guarded, stage
from redrive.runtime.inprocess import InProcessRetry
from redrive.runtime.outbox import Delivery, Intent, deliver
from redrive.runtime.scheduler import Scheduler
from redrive.runtime.worker import Worker
from redrive.runtime.writes import write_phase
from redrive.settings import Settings
from redrive.store.memory import MemoryStore
from redrive.store.port import Store
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SQLiteStore
from redrive.store.url import open_store

__all__ = [
    "AdditiveJitter",
    "App",
    "ArgumentsNotSerializable",
    "Backoff",
    "BreakerMode",
    "BreakerPolicy",
    "BreakerStatus",
    "CircuitOpen",
    "Classifier",
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
    "Kind",
    "LeaseLost",
    "MemoryStore",
    "OutboxRow",
    "OutboxStatus",
    "Permanent",
    "PostgresStore",
    "ProportionalJitter",
    "RedriveError",
    "Replay",
    "SQLiteStore",
    "Schedule",
    "Scheduler",
    "SchemaOutdated",
    "Settings",
    "Stage",
    "Status",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoreUnavailable",
    "Task",
    "Taxonomy",
    "Transient",
    "UnknownDependency",
    "UnknownTask",
    "Worker",
    "add_context",
    "current_job",
    "deliver",
    "guarded",
    "job_id_for",
    "open_store",
    "stage",
    "write_phase",
]
