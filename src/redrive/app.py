"""The application: declare tasks, dependencies and schedules on an ``App``.

``App`` only declares (into its ``registry``) and carries the settings. What
uses the declarations gets them handed over: ``app.client`` enqueues and reads
(``app.enqueue`` is a shortcut to it), ``app.admin(actor)`` is the operator
API, and a worker is built on the client (``Worker(app.client)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, overload

from redrive.admin import Actor, Admin
from redrive.client import Client, JobRequest
from redrive.core import checks
from redrive.core.alerts import Rule as AlertRule
from redrive.core.backoff import Backoff, FullJitter
from redrive.core.classify import DEFAULT_CLASSIFIER, Classifier
from redrive.core.job import JSON, EnqueueResult
from redrive.core.limits import Rate
from redrive.core.progress import Progress
from redrive.core.schedule import Firing, Schedule
from redrive.core.stages import Stage, check_timeout, pipeline
from redrive.core.workflow import WorkflowCreated, WorkflowState
from redrive.declarations import Dependency, P, R, Registry, Task
from redrive.errors import ConfigError
from redrive.settings import Settings
from redrive.store.operations import FullStore
from redrive.stream import EventStream
from redrive.workflows import Workflow


class App:
    """Tasks, dependencies, schedules and settings. The store opens on first use."""

    def __init__(
        self,
        database_url: str | None = None,
        *,
        settings: Settings | None = None,
        store: FullStore | None = None,
        classifier: Classifier = DEFAULT_CLASSIFIER,
        dependencies: Sequence[Dependency] = (),
    ) -> None:
        """``classifier`` maps exceptions and HTTP responses to this app's error
        codes; ``dependencies`` are the services tasks may declare they call."""
        if settings is not None and database_url is not None:
            settings = settings.with_(database_url=database_url)
        self.settings = settings or Settings.load(database_url=database_url)
        self.registry = Registry(classifier=classifier)
        self.events = EventStream()  # what happens to this app's jobs (redrive.events)
        for dependency in dependencies:
            self.registry.add_dependency(dependency)
        self._store = store
        self._client: Client | None = None

    # -- what the app declared -------------------------------------------------

    @property
    def tasks(self) -> Mapping[str, Task[Any, Any]]:
        return self.registry.tasks

    @property
    def dependencies(self) -> Mapping[str, Dependency]:
        return self.registry.dependencies

    @property
    def schedules(self) -> Mapping[str, Schedule]:
        return self.registry.schedules

    @property
    def classifier(self) -> Classifier:
        return self.registry.classifier

    def dependency(self, name: str) -> Dependency:
        return self.registry.dependency(name)

    # -- the client, the operator API, the store -------------------------------

    @property
    def client(self) -> Client:
        """Enqueues and reads on the app's database (opened on first use)."""
        if self._client is None:
            self._client = Client(self.registry, settings=self.settings, store=self._store,
                                  events=self.events)
        return self._client

    @property
    def store(self) -> FullStore:
        return self.client.store

    def admin(self, actor: Actor) -> Admin:
        """The operator API on the app's database, acting as ``actor``."""
        return Admin(self.store, actor=actor, registry=self.registry, events=self.events)

    def enqueue(self, task: str | Task[Any, Any], **options: Any) -> EnqueueResult:
        """A shortcut to ``app.client.enqueue``."""
        return self.client.enqueue(task, **options)

    def enqueue_many(self, requests: Sequence[JobRequest], *, conn: Any = None) -> list[EnqueueResult]:
        """A shortcut to ``app.client.enqueue_many``."""
        return self.client.enqueue_many(requests, conn=conn)

    async def enqueue_async(self, task: str | Task[Any, Any], **options: Any) -> EnqueueResult:
        """A shortcut to ``app.client.enqueue_async``."""
        return await self.client.enqueue_async(task, **options)

    async def enqueue_many_async(self, requests: Sequence[JobRequest], *, conn: Any = None) -> list[EnqueueResult]:
        """A shortcut to ``app.client.enqueue_many_async``."""
        return await self.client.enqueue_many_async(requests, conn=conn)

    def create_workflow(self, workflow: Workflow, *, conn: Any = None) -> WorkflowCreated:
        """A shortcut to ``app.client.create_workflow``."""
        return self.client.create_workflow(workflow, conn=conn)

    def workflow(self, workflow_id: Any) -> WorkflowState:
        """A shortcut to ``app.client.workflow``."""
        return self.client.workflow(workflow_id)

    def progress(self, job_id: Any) -> Progress | None:
        """A shortcut to ``app.client.progress``."""
        return self.client.progress(job_id)

    def result(self, job_id: Any, *, timeout: Any = None) -> Any:
        """A shortcut to ``app.client.result``: wait for a job's result."""
        return self.client.result(job_id, timeout=timeout)

    async def result_async(self, job_id: Any, *, timeout: Any = None) -> Any:
        """A shortcut to ``app.client.result_async``."""
        return await self.client.result_async(job_id, timeout=timeout)

    def use_database(self, database_url: str) -> None:
        """Point the app at another database (the CLI's ``--database-url``);
        a store already open is closed first."""
        self.close()
        self._store = None
        self.settings = self.settings.with_(database_url=database_url)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        elif self._store is not None:
            self._store.close()
        self._store = None

    def __enter__(self) -> App:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    # -- declaring -------------------------------------------------------------

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...
    @overload
    def task(
        self, fn: None = None, /, *, name: str | None = None, queue: str = "default", priority: int = 0,
        max_attempts: int | None = None, backoff: Backoff | None = None,
        classifier: Classifier | None = None, stages: Sequence[Stage | str] | None = None,
        dependencies: Sequence[str] = (), already_done: Callable[..., Any] | None = None,
        timeout: timedelta | None = None, hard_timeout: timedelta | None = None, max_snoozes: int = 100,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(
        self,
        fn: Callable[P, R] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        classifier: Classifier | None = None,
        stages: Sequence[Stage | str] | None = None,
        dependencies: Sequence[str] = (),
        already_done: Callable[..., Any] | None = None,
        timeout: timedelta | None = None,
        hard_timeout: timedelta | None = None,
        max_snoozes: int = 100,
    ) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
        """Register a sync or async function as a task: ``@app.task`` or ``@app.task(queue=...)``.

        ``stages`` makes it a pipeline: each ``Stage`` has its own attempt
        budget and backoff, and the task body runs them with ``redrive.stage``.
        Its jobs may then be dispatched up to the sum of the budgets unless
        ``max_attempts`` caps them lower. ``dependencies`` names the app's
        ``Dependency``s whose breakers gate the task's jobs. ``already_done``,
        called with the job's arguments before every run, returns the result
        when the work already exists (None when not): the job then succeeds
        without running the body, so a retry after a stalled status write
        does no work twice. ``timeout`` bounds one run: past it an async
        task is cancelled and a sync one abandoned (its thread cannot be
        killed; whatever it returns later is dropped), and the attempt fails
        with the retryable ``TIMEOUT``. A ``Stage`` may have its own.
        ``hard_timeout`` is the limit nothing outlives: under ``redrive
        worker --processes N`` a run past it has its worker process killed
        and replaced (the attempt fails ``TIMEOUT``, the other jobs that
        process held go back to the queue, their attempts refunded); in a
        single process it abandons the run as ``timeout`` does
        (``docs/processes.md``). ``max_snoozes``: how often one job may
        ``raise redrive.Snooze(delay)`` (run again later, no attempt spent)
        before it fails for good with ``SNOOZE_LIMIT``."""
        check_timeout(timeout, "a task")
        if hard_timeout is not None and (not isinstance(hard_timeout, timedelta) or hard_timeout <= timedelta(0)):
            raise ConfigError(f"a task: hard_timeout must be a timedelta longer than zero, not {hard_timeout!r}")
        if timeout is not None and hard_timeout is not None and hard_timeout <= timeout:
            raise ConfigError(f"hard_timeout ({hard_timeout.total_seconds():g}s) must be longer than timeout "
                              f"({timeout.total_seconds():g}s): the soft limit is the one that asks first")
        if already_done is not None and not callable(already_done):
            raise ConfigError("already_done must be a function of the job's arguments")
        for dependency in dependencies:
            self.registry.dependency(dependency)

        def register(fn: Callable[P, R]) -> Task[P, R]:
            declared = pipeline(stages) if stages is not None else ()
            if declared and backoff is not None:
                raise ConfigError("a task with stages takes its backoff per stage (Stage(backoff=...))")
            task = Task(
                name=name or fn.__name__, fn=fn, queue=queue, priority=priority,
                max_attempts=checks.max_attempts(max_attempts) or (sum(s.max_attempts for s in declared) or None),
                backoff=backoff or FullJitter(), classifier=classifier, stages=declared,
                dependencies=tuple(dependencies), already_done=already_done, timeout=timeout,
                hard_timeout=hard_timeout, max_snoozes=max_snoozes,
                enqueuer=self,
            )
            self.registry.add_task(task)
            return task

        return register(fn) if fn is not None else register

    def queue(
        self, name: str, *, concurrency: int | None = None, rate: Rate | None = None,
        rate_per_owner: Rate | None = None,
    ) -> None:
        """Limits on a queue that every worker keeps, shared through the store:
        at most ``concurrency`` of its jobs running at once across all
        workers; at most ``rate`` starts in any window (``Rate(100,
        per=timedelta(minutes=1))``); and at most ``rate_per_owner`` starts
        for each owner's jobs. A job that does not fit waits, queued, without
        spending an attempt. (A worker's own limit per queue is
        ``--queue email=5``.)"""
        self.registry.add_queue(checks.queue_name(name), concurrency=concurrency, rate=rate,
                                rate_per_owner=rate_per_owner)

    def alert(self, rule: AlertRule) -> None:
        """An alert rule evaluated inside redrive (``redrive.alerts``:
        ``QueueDepth``, ``OldestQueuedAge``, ``FailureRate``,
        ``DurationPercentile``, or a ``Check`` of your own) by the process run
        with ``--alerts``; it notifies when it fires and when it resolves."""
        self.registry.add_alert(rule)

    def schedule(
        self,
        name: str,
        task: str | Task[Any, Any],
        cron: str,
        *,
        timezones: Sequence[str] | str | Callable[[], Iterable[str]] = ("UTC",),
        entities: Callable[[str], Iterable[Any]] | None = None,
        kwargs: Mapping[str, JSON] | Callable[[Firing], Mapping[str, JSON]] | None = None,
        catch_up: int = 1,
    ) -> Schedule:
        """Run ``task`` at each time of ``cron`` on the wall clock of each time
        zone, once per firing however many schedulers run: each firing is
        enqueued under the key ``{name}:{local date}:{tz}[:{entity}]`` (with the
        local time too when the schedule fires more than daily). ``entities(tz)``
        makes one job per entity, such as every user in that time zone;
        ``kwargs`` may be a function of the ``Firing``. After downtime only the
        ``catch_up`` most recent missed firings per time zone run."""
        declared = Schedule(name=name, task=self.registry.task(task).name, cron=cron, timezones=timezones,
                            entities=entities, kwargs=kwargs or {}, catch_up=catch_up)
        if kwargs is not None and not callable(kwargs):
            checks.json_value(dict(kwargs), "kwargs")
        self.registry.add_schedule(declared)
        return declared
