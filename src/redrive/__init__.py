"""redrive: a reliable background-job engine.

Declare tasks on an ``App``, enqueue jobs, run ``Worker``s (or ``redrive worker``).
"""

from redrive.app import App, EnqueueResult, JobRequest, Task
from redrive.core.backoff import FullJitter
from redrive.core.job import Job, JobEvent
from redrive.core.states import Status
from redrive.errors import (
    ArgumentsNotSerializable,
    ConfigError,
    IllegalTransition,
    JobError,
    JobNotFound,
    Permanent,
    RedriveError,
    SchemaOutdated,
    StoreBusy,
    StoreError,
    StoreUnavailable,
    Transient,
    UnknownTask,
)
from redrive.runtime.context import current_job
from redrive.runtime.worker import Worker
from redrive.settings import Settings
from redrive.store.memory import MemoryStore
from redrive.store.port import Store
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SQLiteStore
from redrive.store.url import open_store

__all__ = [
    "App",
    "ArgumentsNotSerializable",
    "ConfigError",
    "EnqueueResult",
    "FullJitter",
    "IllegalTransition",
    "Job",
    "JobError",
    "JobEvent",
    "JobNotFound",
    "JobRequest",
    "MemoryStore",
    "Permanent",
    "PostgresStore",
    "RedriveError",
    "SQLiteStore",
    "SchemaOutdated",
    "Settings",
    "Status",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoreUnavailable",
    "Task",
    "Transient",
    "UnknownTask",
    "Worker",
    "current_job",
    "open_store",
]
