"""The client: declare tasks, enqueue jobs (also inside the caller's transaction), read them."""

from __future__ import annotations

import inspect
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping, Sequence, overload
from uuid import UUID

from redrive.core.backoff import Backoff, FullJitter
from redrive.core.classify import DEFAULT_CLASSIFIER, Classifier
from redrive.core.job import JSON, Job, JobEvent, NewJob
from redrive.core.states import Status
from redrive.errors import ArgumentsNotSerializable, ConfigError, JobNotFound, UnknownTask
from redrive.settings import Settings
from redrive.store.port import Store
from redrive.store.url import open_store

_SMALLINT = range(-32768, 32768)


@dataclass(frozen=True, slots=True)
class Task:
    """A function registered with an app; calling it runs the function directly."""

    name: str
    fn: Callable[..., Any]
    queue: str = "default"
    priority: int = 0
    max_attempts: int | None = None
    backoff: Backoff = field(default_factory=FullJitter)
    classifier: Classifier | None = None  # None: the app's

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


@dataclass(frozen=True, slots=True)
class JobRequest:
    """One job to enqueue. Unset options fall back to the task's, then the app's."""

    task: str | Task
    args: Sequence[JSON] = ()
    kwargs: Mapping[str, JSON] = field(default_factory=dict)
    queue: str | None = None
    priority: int | None = None
    run_at: datetime | None = None
    delay: timedelta | None = None
    owner: str | None = None
    max_attempts: int | None = None


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    job: Job
    duplicate: bool = False


class App:
    """Tasks, settings and a store. The store opens on first use."""

    def __init__(
        self,
        database_url: str | None = None,
        *,
        settings: Settings | None = None,
        store: Store | None = None,
        classifier: Classifier = DEFAULT_CLASSIFIER,
    ) -> None:
        """``classifier`` maps exceptions and HTTP responses to this app's error codes."""
        if settings is not None and database_url is not None:
            settings = settings.with_(database_url=database_url)
        self.settings = settings or Settings.load(database_url=database_url)
        self._store = store
        self.classifier = classifier
        self.tasks: dict[str, Task] = {}

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = open_store(self.settings.database_url)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- tasks ---------------------------------------------------------------

    @overload
    def task(self, fn: Callable[..., Any], /) -> Task: ...
    @overload
    def task(
        self, *, name: str | None = None, queue: str = "default", priority: int = 0,
        max_attempts: int | None = None, backoff: Backoff | None = None,
        classifier: Classifier | None = None,
    ) -> Callable[[Callable[..., Any]], Task]: ...

    def task(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        classifier: Classifier | None = None,
    ) -> Task | Callable[[Callable[..., Any]], Task]:
        """Register a sync or async function as a task: ``@app.task`` or ``@app.task(queue=...)``."""

        def register(fn: Callable[..., Any]) -> Task:
            task = Task(
                name=name or fn.__name__, fn=fn, queue=_queue(queue),
                priority=_priority(priority), max_attempts=_max_attempts(max_attempts),
                backoff=backoff or FullJitter(), classifier=classifier,
            )
            if task.name in self.tasks and self.tasks[task.name].fn is not fn:
                raise ConfigError(f"two tasks are named {task.name!r}; pass name= to tell them apart")
            self.tasks[task.name] = task
            return task

        return register(fn) if fn is not None else register

    def _task(self, task: str | Task) -> Task:
        name = task.name if isinstance(task, Task) else task
        if name not in self.tasks:
            known = ", ".join(sorted(self.tasks)) or "none"
            raise UnknownTask(f"no task named {name!r} is registered (known: {known})", task=name)
        return self.tasks[name]

    # -- enqueue -------------------------------------------------------------

    def enqueue(
        self,
        task: str | Task,
        *,
        args: Sequence[JSON] = (),
        kwargs: Mapping[str, JSON] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        run_at: datetime | None = None,
        delay: timedelta | None = None,
        owner: str | None = None,
        max_attempts: int | None = None,
        conn: Any = None,
    ) -> EnqueueResult:
        """Create one job. With ``conn`` (your open psycopg or sqlite3 connection)
        the job exists if and only if your transaction commits."""
        request = JobRequest(
            task=task, args=args, kwargs=kwargs or {}, queue=queue, priority=priority,
            run_at=run_at, delay=delay, owner=owner, max_attempts=max_attempts,
        )
        return self.enqueue_many([request], conn=conn)[0]

    def enqueue_many(self, requests: Sequence[JobRequest], *, conn: Any = None) -> list[EnqueueResult]:
        """Create many jobs in one statement (one transaction)."""
        new = [self._new_job(r) for r in requests]
        return [EnqueueResult(job) for job in self.store.jobs_insert(jobs=new, conn=conn)]

    def _new_job(self, request: JobRequest) -> NewJob:
        task = self._task(request.task)
        if request.run_at is not None and request.delay is not None:
            raise ConfigError("give run_at or delay, not both")
        if request.run_at is not None and request.run_at.tzinfo is None:
            raise ConfigError("run_at must be timezone-aware (for example datetime.now(timezone.utc))")
        if request.delay is not None and request.delay < timedelta(0):
            raise ConfigError("delay cannot be negative")
        max_attempts = request.max_attempts or task.max_attempts or self.settings.retry_max_attempts
        return NewJob(
            id=uuid.uuid4(),
            task=task.name,
            queue=_queue(request.queue or task.queue),
            args=_json(list(request.args), "args"),
            kwargs=_json(dict(request.kwargs), "kwargs"),
            priority=_priority(task.priority if request.priority is None else request.priority),
            max_attempts=_max_attempts(max_attempts),
            owner=request.owner,
            run_at=request.run_at,
            delay=request.delay,
        )

    # -- reading and control -------------------------------------------------

    def job(self, job_id: UUID | str) -> Job:
        job = self.store.job_get(job_id=_uuid(job_id))
        if job is None:
            raise JobNotFound(f"no job has id {job_id}")
        return job

    def jobs(
        self,
        *,
        status: Status | Sequence[Status] | None = None,
        queue: str | None = None,
        task: str | None = None,
        limit: int = 100,
    ) -> list[Job]:
        statuses = [status] if isinstance(status, str) else status
        return self.store.jobs_list(
            statuses=None if statuses is None else [Status(s) for s in statuses],
            queue=queue, task=task, limit=limit,
        )

    def events(self, job_id: UUID | str) -> list[JobEvent]:
        return self.store.job_events_list(job_id=_uuid(job_id))

    def cancel(self, job_id: UUID | str) -> Job:
        return self.store.job_cancel(job_id=_uuid(job_id))


def _json(value: Any, what: str) -> Any:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ArgumentsNotSerializable(f"job {what} are not JSON-serialisable: {exc}") from None
    return value


def _uuid(job_id: UUID | str) -> UUID:
    if isinstance(job_id, UUID):
        return job_id
    try:
        return UUID(job_id)
    except ValueError:
        raise JobNotFound(f"{job_id!r} is not a job id") from None


def _queue(queue: str) -> str:
    if not isinstance(queue, str) or not queue.strip():
        raise ConfigError("a queue name must be a non-empty string")
    return queue


def _priority(priority: int) -> int:
    if not isinstance(priority, int) or priority not in _SMALLINT:
        raise ConfigError(f"priority must be an integer from {_SMALLINT.start} to {_SMALLINT.stop - 1}")
    return priority


def _max_attempts(value: int | None) -> int | None:
    if value is not None and (not isinstance(value, int) or value < 1):
        raise ConfigError("max_attempts must be an integer of at least 1")
    return value
