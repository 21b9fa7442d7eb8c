"""The client: enqueue jobs (also inside the caller's transaction) and read them.

A ``Client`` is a store and the declarations that enqueue checks requests
against. It is what application code holds (``app.client``, or ``app.enqueue``
as a shortcut) and what a worker is built on. Operator actions (retry,
cancel, replay, breakers) are on ``Admin``, which acts as one principal.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any
from uuid import UUID

import uuid_utils

from redrive import tracing
from redrive.core import checks, ids
from redrive.core.job import JSON, EnqueueResult, Job, JobEvent, JobKey, NewJob
from redrive.core.progress import Progress
from redrive.core.schedule import Firing, Schedule
from redrive.core.states import Status
from redrive.core.workflow import NewWorkflow, WorkflowCreated, WorkflowState
from redrive.declarations import Call, JobRequest, Registry, Task
from redrive.errors import (
    ConfigError,
    JobNotFound,
    ResultCancelled,
    ResultFailed,
    ResultTimeout,
    StoreTimeout,
    WorkflowNotFound,
)
from redrive.settings import Settings
from redrive.store.operations import FullStore
from redrive.store.reads import JobFilter, Page
from redrive.store.url import open_store
from redrive.stream import EventStream
from redrive.transactions import driver_connection, driver_connection_async
from redrive.workflows import Workflow, build

_RESULT_RECHECK_S = 1.0  # a waiter re-reads its job this often even if no wake-up comes


@contextmanager
def _collector_held(jobs: int) -> Iterator[None]:
    """Python's cyclic collector held off while a batch is built and sent.
    Each job makes a few objects that live until the call returns (its
    request, id, row and answer), so a batch of thousands sets off young
    collections that find them all alive and scan them again, and full ones
    that scan the caller's whole heap: a tenth of a 1,000-job enqueue here
    (bench/NOTES.md). The batch makes no cycles of its own, so nothing
    waits long for collection. Process-wide, as the collector is: a thread
    that finds it off leaves it so, and only the call that turned it off
    turns it back on."""
    if jobs < _HELD_FROM or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


_HELD_FROM = 100  # jobs in a batch: fewer make too few objects to set off a collection


class Client:
    """Enqueues and reads jobs on one store. The store opens on first use
    (from ``settings.database_url`` unless one is given) and closes with the
    client, or at the end of a ``with`` block."""

    def __init__(self, registry: Registry, *, settings: Settings | None = None,
                 store: FullStore | None = None, events: EventStream | None = None) -> None:
        """``events``: where what happens to the client's jobs is announced
        (the app's stream; a worker built on this client emits there too)."""
        self.registry = registry
        self.settings = settings or Settings.load()
        self.events = events or EventStream()
        self._store = store

    @property
    def store(self) -> FullStore:
        if self._store is None:
            self._store = open_store(self.settings.database_url, settings=self.settings)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    # -- enqueue -------------------------------------------------------------

    def enqueue(
        self,
        task: str | Task[Any, Any],
        *,
        args: Sequence[JSON] = (),
        kwargs: Mapping[str, JSON] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        run_at: datetime | None = None,
        delay: timedelta | None = None,
        owner: str | None = None,
        max_attempts: int | None = None,
        idempotency_key: str | None = None,
        version: int = 1,
        dedupe: Sequence[JSON] | None = None,
        conn: Any = None,
    ) -> EnqueueResult:
        """Create one job. With ``conn`` (your open psycopg or sqlite3
        connection, a SQLAlchemy ``Session`` or ``Connection``, or Django's
        connection inside ``transaction.atomic()``: ``redrive.transactions``)
        the job exists if and only if your transaction commits.

        ``idempotency_key`` (unique per owner and task, at most 255 characters)
        makes the enqueue safe to repeat: the same key returns the existing job
        (``duplicate=True``) whatever its state; the same key and version with
        other arguments raises ``IdempotencyKeyReused``; a strictly higher
        ``version`` is a new run under the key. The job's id is then the UUIDv5
        of the key (``job_id_for``). ``dedupe`` (a tuple of values such as
        owner, content hash and size) returns a queued, running or succeeded
        twin instead of creating a job; a failed or cancelled twin gets a new run."""
        request = JobRequest(
            task=task, args=args, kwargs=kwargs or {}, queue=queue, priority=priority,
            run_at=run_at, delay=delay, owner=owner, max_attempts=max_attempts,
            idempotency_key=idempotency_key, version=version, dedupe=dedupe,
        )
        return self.enqueue_many([request], conn=conn)[0]

    async def enqueue_async(self, task: str | Task[Any, Any], *, conn: Any = None, **options: Any) -> EnqueueResult:
        """``enqueue`` without blocking the event loop. With ``conn`` (on
        PostgreSQL: a psycopg ``AsyncConnection``, a SQLAlchemy ``AsyncSession``
        or ``AsyncConnection``) the job exists if and only if your transaction
        commits; without, the store call runs on a thread."""
        if conn is None:
            return await asyncio.to_thread(self.enqueue, task, **options)
        options["kwargs"] = options.get("kwargs") or {}
        return (await self.enqueue_many_async([JobRequest(task=task, **options)], conn=conn))[0]

    async def enqueue_many_async(self, requests: Sequence[JobRequest], *, conn: Any = None) -> list[EnqueueResult]:
        """``enqueue_many`` without blocking the event loop; ``conn`` as for ``enqueue_async``."""
        if conn is None:
            return await asyncio.to_thread(self.enqueue_many, requests)
        joined = await driver_connection_async(conn)
        store = await asyncio.to_thread(lambda: self.store)  # opening it may connect: not on the loop
        insert = getattr(store, "jobs_insert_async", None)
        if insert is None:
            raise ConfigError("enqueue_async joins an asynchronous transaction only on PostgreSQL; "
                              "on SQLite, enqueue(conn=...) with a sync connection")
        with tracing.sending(lambda: [r.queue or self.registry.task(r.task).queue for r in requests]) as carrier:
            done: list[EnqueueResult] = await insert(jobs=list(self._new_jobs(requests, carrier)), conn=joined)
        self._announce(done)
        return done

    def enqueue_many(self, requests: Sequence[JobRequest], *, conn: Any = None) -> list[EnqueueResult]:
        """Create many jobs in one transaction, in order: all of them or, if any
        request is refused, none. A batch of 100 or more holds Python's cyclic
        garbage collector off until the call returns (``_collector_held``)."""
        # Checked as the store takes them: PostgreSQL inserts a big batch in
        # pipelined parts while the rest is still being checked.
        conn = self._joining(conn)
        with tracing.sending(lambda: [r.queue or self.registry.task(r.task).queue for r in requests]) as carrier, \
                _collector_held(len(requests)):
            try:
                done = self.store.jobs_insert(jobs=self._new_jobs(requests, carrier), conn=conn)
            except StoreTimeout as exc:
                raise StoreTimeout(f"{exc.fields.get('silent', exc.message)}: the job may or may not have been created; "
                                   "enqueue it again with the same idempotency key, which returns the job "
                                   "if it was") from exc
        self._announce(done)
        return done

    def _joining(self, conn: Any) -> Any:
        """The driver's connection under the caller's handle (a SQLAlchemy
        Session's, Django's), or None."""
        if conn is None:
            return None
        conn = driver_connection(conn)
        if self._store is None:
            # Opened through the caller's connection: a SQLite store set up on
            # a connection of its own would wait on the caller's write lock.
            self._store = open_store(self.settings.database_url, joining=conn, settings=self.settings)
        return conn

    def create_workflow(self, workflow: Workflow, *, conn: Any = None) -> WorkflowCreated:
        """Create ``workflow``'s steps and edges in one transaction (``conn``: the caller's, as for
        ``enqueue``); a key already taken creates nothing and answers the workflow holding it (``duplicate``)."""
        new = self.plan_workflow(workflow)
        return self.store.workflow_insert(workflow=new, conn=self._joining(conn))

    def plan_workflow(self, workflow: Workflow, spawned_by: Job | None = None) -> NewWorkflow:
        """What creating ``workflow`` writes (its steps' jobs checked as ``enqueue``'s, its edges); one a
        running job spawned (``redrive.spawn``) belongs to that job's owner unless it names one."""
        owner = workflow.owner if workflow.owner is not None or spawned_by is None else spawned_by.owner

        def step_job(call: Call) -> NewJob:
            return self._new_job(JobRequest(call.task, call.args, call.kwargs, owner=owner, **call.options))

        return build(workflow, _uuid7(), step_job, owner=owner, spawned_by=None if spawned_by is None else spawned_by.id)

    def progress(self, job_id: UUID | str) -> Progress | None:
        """The job's latest progress (``redrive.progress``), None if it said none."""
        return self.store.progress_read(job_ids=[job_id := read_job(self.store, job_id).id]).get(job_id)

    def workflow(self, workflow_id: UUID | str) -> WorkflowState:
        """A workflow, its status and its steps' counts."""
        if (found := self.store.workflow_get(id=checks.workflow_uuid(workflow_id))) is None:
            raise WorkflowNotFound(f"no workflow has id {workflow_id}")
        return found

    def _announce(self, done: list[EnqueueResult]) -> None:
        if self.events.wants("job.enqueued"):
            for result in done:
                if not result.duplicate:
                    self.events.emit("job.enqueued", job_id=str(result.job.id), task=result.job.task,
                                     queue=result.job.queue)

    def _new_jobs(self, requests: Sequence[JobRequest], trace: dict[str, str] | None) -> Iterator[NewJob]:
        keys = set()
        for request in requests:
            new = self._new_job(request)
            if trace:
                new = replace(new, trace=trace)
            if new.key:
                name = (new.task, new.owner, new.key.key)
                if name in keys:
                    raise ConfigError("a batch may use each idempotency key (or dedupe tuple) once")
                keys.add(name)
            yield new

    def _new_job(self, request: JobRequest) -> NewJob:
        task = self.registry.task(request.task)
        if request.run_at is not None and request.delay is not None:
            raise ConfigError("give run_at or delay, not both")
        # The task's own options were checked when it was made (Task); what
        # the request gives is checked here. None means "not given"; a given
        # 0 or "" is an error, never a default.
        args, kwargs = request.args, request.kwargs
        # most jobs of a batch carry no arguments: nothing to check or copy
        args = [] if type(args) is tuple and not args else checks.json_value(checks.job_args(args), "args")
        kwargs = {} if type(kwargs) is dict and not kwargs else checks.json_value(checks.job_kwargs(kwargs), "kwargs")
        key = _job_key(request, args, kwargs)
        return NewJob(
            # time-ordered (UUIDv7), so a new job lands at the right edge of every
            # index on job ids (the job tables' keys, the event index), not on a random page
            id=ids.job_id_for(task.name, key.key, key.version, request.owner)
            if key and key.kind == "key" else _uuid7(),
            task=task.name,
            queue=task.queue if request.queue is None else checks.queue_name(request.queue),
            args=args,
            kwargs=kwargs,
            priority=task.priority if request.priority is None else checks.priority(request.priority),
            max_attempts=checks.max_attempts(request.max_attempts) or task.max_attempts
            or self.settings.retry_max_attempts,
            owner=checks.owner(request.owner),
            run_at=checks.run_at(request.run_at),
            delay=checks.delay(request.delay),
            stage=task.first_stage,
            dependencies=task.dependencies,
            key=key,
        )

    # -- reading -------------------------------------------------------------

    def job(self, job_id: UUID | str) -> Job:
        return read_job(self.store, job_id)

    def jobs(
        self,
        *,
        status: Status | Sequence[Status] | None = None,
        queue: str | None = None,
        task: str | None = None,
        owner: str | None = None,
        error_code: str | None = None,
        idempotency_key: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        after: str | None = None,
        limit: int = 50,
    ) -> Page[Job]:
        """A page of jobs, newest first, active and finished alike; pass the
        page's ``next_cursor`` as ``after`` for the next one (None: no more)."""
        where = job_filter(status=status, queue=queue, task=task, owner=owner, error_code=error_code,
                           idempotency_key=idempotency_key, created_after=created_after,
                           created_before=created_before)
        return self.store.jobs_page(where=where, after=after, limit=limit)

    def result(self, job_id: UUID | str, *, timeout: timedelta | float | None = None) -> JSON:
        """Wait for the job to end and return its result; raise ``ResultFailed``
        (with the job's code and message) or ``ResultCancelled``, or
        ``ResultTimeout`` after ``timeout`` (seconds or a timedelta; None:
        wait as long as it takes). The store wakes the wait when the job ends
        (LISTEN/NOTIFY on PostgreSQL, the data-version watch on SQLite); a
        slow re-read every second is only a safety net."""
        wanted = checks.job_uuid(job_id)
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        if seconds is not None and (isinstance(seconds, bool) or not seconds >= 0):
            raise ConfigError("timeout is a duration of zero or more")
        deadline = None if seconds is None else time.monotonic() + seconds
        woken = threading.Event()
        stop = self.store.finishes_subscribe(job_id=wanted, on_finish=woken.set)
        try:
            while True:
                woken.clear()
                job = read_job(self.store, wanted)
                if job.status is Status.SUCCEEDED:
                    return job.result
                if job.status is Status.FAILED:
                    raise ResultFailed(f"job {job.id} failed [{job.error_code}]: {job.error_message}",
                                    job_id=job.id, error_code=job.error_code)
                if job.status is Status.CANCELLED:
                    raise ResultCancelled(f"job {job.id} was cancelled")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise ResultTimeout(f"job {job.id} is still {job.status} after {seconds:g} s")
                woken.wait(_RESULT_RECHECK_S if left is None else min(left, _RESULT_RECHECK_S))
        finally:
            stop()

    async def result_async(self, job_id: UUID | str, *, timeout: timedelta | float | None = None) -> JSON:
        """``result`` without blocking the event loop (the wait runs on a thread)."""
        return await asyncio.to_thread(self.result, job_id, timeout=timeout)

    def job_events(self, job_id: UUID | str) -> list[JobEvent]:
        """The job's history, oldest first: one event per state change."""
        return self.store.job_events_list(job_id=checks.job_uuid(job_id))


def _uuid7() -> UUID:
    """A new UUIDv7 as the standard library's type (uuid_utils makes it)."""
    return ids.uuid_of(uuid_utils.uuid7().int)


def firing_request(schedule: Schedule, firing: Firing) -> JobRequest:
    """The job of one firing of a schedule, under the firing's key."""
    return JobRequest(schedule.task, kwargs=schedule.arguments(firing), idempotency_key=firing.key)


def read_job(store: FullStore, job_id: UUID | str) -> Job:
    job = store.job_get(job_id=checks.job_uuid(job_id))
    if job is None:
        raise JobNotFound(f"no job has id {job_id}")
    return job


def job_filter(
    *, status: Status | Sequence[Status] | None = None, created_after: datetime | None = None,
    created_before: datetime | None = None, **equal: str | None,
) -> JobFilter:
    """A checked ``JobFilter``: known statuses, timezone-aware times."""
    statuses = [status] if isinstance(status, str) else status
    try:
        wanted = None if statuses is None else tuple(Status(s) for s in statuses)
    except ValueError:
        raise ConfigError(f"a status is one of {', '.join(Status)}") from None
    for when in (created_after, created_before):
        if when is not None and (not isinstance(when, datetime) or when.tzinfo is None):
            raise ConfigError("created_after and created_before are timezone-aware datetimes")
        if when is not None:
            checks.utc(when, "created_after and created_before")
    for name, value in equal.items():
        if value is not None:
            checks.text(value, name)
    return JobFilter(statuses=wanted, created_after=created_after, created_before=created_before, **equal)


def _job_key(request: JobRequest, args: list[JSON], kwargs: dict[str, JSON]) -> JobKey | None:
    version = ids.version(request.version)
    if request.idempotency_key is not None and request.dedupe is not None:
        raise ConfigError("give an idempotency_key or a dedupe tuple, not both")
    if request.dedupe is not None:
        if version != 1:
            raise ConfigError("versions go with idempotency keys, not with dedupe")
        return JobKey(ids.content_key(request.dedupe), 1, ids.fingerprint(args, kwargs), kind="content")
    if request.idempotency_key is None:
        if version != 1:
            raise ConfigError("a version needs an idempotency_key to belong to")
        return None
    return JobKey(ids.idempotency_key(request.idempotency_key), version, ids.fingerprint(args, kwargs))
