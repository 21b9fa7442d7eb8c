"""The client: declare tasks, enqueue jobs (also inside the caller's transaction), read them."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, overload
from uuid import UUID

from uuid_utils.compat import uuid7

from redrive.core.backoff import Backoff, FullJitter
from redrive.core.breaker import (
    Breaker, BreakerMode, BreakerPolicy, failure_percent, force_closed, force_open, time_open,
)
from redrive.core.classify import DEFAULT_CLASSIFIER, Classifier
from redrive.core import ids
from redrive.core.job import (
    JSON, DeadLetter, DeadLetterFilter, EnqueueResult, Job, JobEvent, JobKey, NewJob, strict_json,
)
from redrive.core.outbox import OutboxRow, OutboxStatus
from redrive.core.schedule import Firing, Schedule
from redrive.core.stages import Stage, pipeline
from redrive.core.states import Status
from redrive.errors import (
    ArgumentsNotSerializable, ConfigError, DeadLetterNotFound, Forbidden, IllegalTransition,
    JobNotFound, UnknownDependency, UnknownTask,
)
from redrive.settings import Settings
from redrive.store.port import Store
from redrive.store.url import open_store

_SMALLINT = range(-32768, 32768)


@dataclass(frozen=True, slots=True)
class Dependency:
    """A downstream service behind a circuit breaker shared by every worker.

    ``mode``: HOLD keeps jobs that need it queued while it is open (no attempt
    spent); FAIL_FAST fails them at once with ``fail_code``. ``probe``, called
    by the workers while it is open (one worker per ``probe_interval``), returns
    True when the service looks healthy; without one, the policy's wait decides."""

    name: str
    policy: BreakerPolicy = field(default_factory=BreakerPolicy)
    mode: BreakerMode = BreakerMode.HOLD
    fail_code: str | None = None
    probe: Callable[[], Any] | None = None
    probe_interval: timedelta = timedelta(seconds=5)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _DEPENDENCY_NAME.match(self.name):
            raise ConfigError(f"dependency name {self.name!r} must be 1-64 letters, digits, '-', '_' or '.'")
        if BreakerMode(self.mode) is BreakerMode.FAIL_FAST and not self.fail_code:
            raise ConfigError(f"dependency {self.name!r} fails fast: give it a fail_code (seed 002: GW_5XX)")
        if self.probe_interval <= timedelta(0):
            raise ConfigError("probe_interval must be longer than zero")


_DEPENDENCY_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


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
    stages: tuple[Stage, ...] = ()  # empty: a plain task, one stage named after it
    dependencies: tuple[str, ...] = ()  # breakers its calls go through
    already_done: Callable[..., Any] | None = None  # the job's arguments -> its result if the work exists, else None
    # Known once: asking inspect costs a few µs, and the worker asks for every job.
    is_async: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.fn))

    @property
    def first_stage(self) -> str:
        return self.stages[0].name if self.stages else self.name

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
    idempotency_key: str | None = None
    version: int = 1
    dedupe: Sequence[JSON] | None = None


@dataclass(frozen=True, slots=True)
class BreakerStatus:
    name: str
    breaker: Breaker
    at: float  # the database's clock when read (epoch seconds)

    @property
    def state(self) -> str:
        return self.breaker.state.value

    @property
    def seconds_open(self) -> float:
        return time_open(self.breaker, self.at)

    def to_dict(self) -> dict[str, JSON]:
        b = self.breaker
        return {"name": self.name, "state": self.state, "forced": b.forced,
                "failure_percent": round(failure_percent(b.window), 1), "calls_in_window": len(b.window),
                "seconds_open": round(self.seconds_open, 3)}


@dataclass(frozen=True, slots=True)
class Replay:
    letter: DeadLetter
    job: Job | None  # the queued job; None when the letter had been replayed already

    @property
    def replayed(self) -> bool:
        return self.job is not None


class App:
    """Tasks, settings and a store. The store opens on first use."""

    def __init__(
        self,
        database_url: str | None = None,
        *,
        settings: Settings | None = None,
        store: Store | None = None,
        classifier: Classifier = DEFAULT_CLASSIFIER,
        dependencies: Sequence[Dependency] = (),
    ) -> None:
        """``classifier`` maps exceptions and HTTP responses to this app's error
        codes; ``dependencies`` are the services tasks may declare they call."""
        if settings is not None and database_url is not None:
            settings = settings.with_(database_url=database_url)
        self.settings = settings or Settings.load(database_url=database_url)
        self._store = store
        self.classifier = classifier
        self.tasks: dict[str, Task] = {}
        self.dependencies: dict[str, Dependency] = {}
        self.schedules: dict[str, Schedule] = {}
        for dependency in dependencies:
            if dependency.name in self.dependencies:
                raise ConfigError(f"dependency {dependency.name!r} is declared twice")
            if dependency.fail_code:
                classifier.taxonomy.require(dependency.fail_code)
            self.dependencies[dependency.name] = dependency

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
        classifier: Classifier | None = None, stages: Sequence[Stage | str] | None = None,
        dependencies: Sequence[str] = (), already_done: Callable[..., Any] | None = None,
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
        stages: Sequence[Stage | str] | None = None,
        dependencies: Sequence[str] = (),
        already_done: Callable[..., Any] | None = None,
    ) -> Task | Callable[[Callable[..., Any]], Task]:
        """Register a sync or async function as a task: ``@app.task`` or ``@app.task(queue=...)``.

        ``stages`` makes it a pipeline: each ``Stage`` has its own attempt
        budget and backoff, and the task body runs them with ``redrive.stage``.
        Its jobs may then be dispatched up to the sum of the budgets unless
        ``max_attempts`` caps them lower. ``dependencies`` names the app's
        ``Dependency``s whose breakers gate the task's jobs. ``already_done``,
        called with the job's arguments before every run, returns the result
        when the work already exists (None when not): the job then succeeds
        without running the body, so a retry after a stalled status write
        does no work twice."""
        if already_done is not None and not callable(already_done):
            raise ConfigError("already_done must be a function of the job's arguments")
        for dependency in dependencies:
            self.dependency(dependency)

        def register(fn: Callable[..., Any]) -> Task:
            declared = pipeline(stages) if stages is not None else ()
            if declared and backoff is not None:
                raise ConfigError("a task with stages takes its backoff per stage (Stage(backoff=...))")
            task = Task(
                name=name or fn.__name__, fn=fn, queue=_queue(queue),
                priority=_priority(priority),
                max_attempts=_max_attempts(max_attempts) or (sum(s.max_attempts for s in declared) or None),
                backoff=backoff or FullJitter(), classifier=classifier, stages=declared,
                dependencies=tuple(dependencies), already_done=already_done,
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

    def schedule(
        self,
        name: str,
        task: str | Task,
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
        declared = Schedule(name=name, task=self._task(task).name, cron=cron, timezones=timezones,
                            entities=entities, kwargs=kwargs or {}, catch_up=catch_up)
        if name in self.schedules:
            raise ConfigError(f"schedule {name!r} is declared twice")
        if kwargs is not None and not callable(kwargs):
            _json(dict(kwargs), "kwargs")
        self.schedules[name] = declared
        return declared

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
        idempotency_key: str | None = None,
        version: int = 1,
        dedupe: Sequence[JSON] | None = None,
        conn: Any = None,
    ) -> EnqueueResult:
        """Create one job. With ``conn`` (your open psycopg or sqlite3 connection)
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

    def enqueue_many(self, requests: Sequence[JobRequest], *, conn: Any = None) -> list[EnqueueResult]:
        """Create many jobs in one transaction, in order: all of them or, if any
        request is refused, none."""
        # Checked as the store takes them: PostgreSQL inserts a big batch in
        # pipelined parts while the rest is still being checked.
        return self.store.jobs_insert(jobs=self._new_jobs(requests), conn=conn)

    def _new_jobs(self, requests: Sequence[JobRequest]) -> Iterator[NewJob]:
        keys = set()
        for request in requests:
            new = self._new_job(request)
            if new.key:
                name = (new.task, new.owner, new.key.key)
                if name in keys:
                    raise ConfigError("a batch may use each idempotency key (or dedupe tuple) once")
                keys.add(name)
            yield new

    def _new_job(self, request: JobRequest) -> NewJob:
        task = self._task(request.task)
        if request.run_at is not None and request.delay is not None:
            raise ConfigError("give run_at or delay, not both")
        if request.run_at is not None and request.run_at.tzinfo is None:
            raise ConfigError("run_at must be timezone-aware (for example datetime.now(timezone.utc))")
        if request.delay is not None and request.delay < timedelta(0):
            raise ConfigError("delay cannot be negative")
        max_attempts = request.max_attempts or task.max_attempts or self.settings.retry_max_attempts
        args = _json(list(request.args), "args")
        kwargs = _json(dict(request.kwargs), "kwargs")
        key = _job_key(request, args, kwargs)
        return NewJob(
            # time-ordered (UUIDv7), so a new job lands at the right edge of every
            # index on job ids (the job tables' keys, the event index), not on a random page
            id=ids.job_id_for(task.name, key.key, key.version, request.owner)
            if key and key.kind == "key" else uuid7(),
            task=task.name,
            queue=_queue(request.queue or task.queue),
            args=args,
            kwargs=kwargs,
            priority=_priority(task.priority if request.priority is None else request.priority),
            max_attempts=_max_attempts(max_attempts),
            owner=request.owner,
            run_at=request.run_at,
            delay=request.delay,
            stage=task.first_stage,
            dependencies=task.dependencies,
            key=key,
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

    def outbox(
        self, *, status: OutboxStatus | str | None = None, job_id: UUID | str | None = None, limit: int = 100,
    ) -> list[OutboxRow]:
        """Outbox rows, oldest first: ``status="failed"`` lists what awaits an operator."""
        try:
            wanted = None if status is None else OutboxStatus(status)
        except ValueError:
            raise ConfigError(f"outbox status must be one of {', '.join(OutboxStatus)}, not {status!r}") from None
        return self.store.outbox_list(status=wanted, job_id=None if job_id is None else _uuid(job_id), limit=limit)

    # -- circuit breakers --------------------------------------------------------

    def dependency(self, name: str) -> Dependency:
        if name not in self.dependencies:
            known = ", ".join(sorted(self.dependencies)) or "none"
            raise UnknownDependency(f"no dependency named {name!r} is declared (known: {known})")
        return self.dependencies[name]

    def breakers(self) -> dict[str, BreakerStatus]:
        """Every breaker the store knows, and the app's declared ones not yet used."""
        stored, now = self.store.breakers_list()
        names = sorted(set(stored) | set(self.dependencies))
        return {n: BreakerStatus(n, stored.get(n, Breaker()), now) for n in names}

    def open_breaker(self, name: str, *, by: str | None = None) -> BreakerStatus:
        """Force a breaker open: it stays open until closed by hand."""
        return self._force(name, force_open, by)

    def close_breaker(self, name: str, *, by: str | None = None) -> BreakerStatus:
        """Close a breaker with a fresh window (and lift a forced open)."""
        return self._force(name, force_closed, by)

    def _force(self, name: str, change: Callable[[Breaker, float], Breaker], by: str | None) -> BreakerStatus:
        if name not in self.dependencies and name not in self.store.breakers_list()[0]:
            self.dependency(name)  # raises with the known names
        now: list[float] = []

        def apply(b: Breaker, at: float) -> Breaker:
            now.append(at)
            return change(b, at)

        return BreakerStatus(name, self.store.breaker_update(name=name, change=apply, by=by), now[0])

    # -- history ---------------------------------------------------------------

    def prune(self, older_than: timedelta | None = None, *, batch: int = 10_000) -> int:
        """Delete history: finished jobs that finished more than ``older_than``
        ago (default: the ``job_retention`` setting), with their events, their
        handled dead letters and their idempotency keys, so a key can be used
        afresh once its job is gone. A failed job whose dead letter is still
        open is kept. Works in batches of ``batch``; returns how many went."""
        older_than = self.settings.job_retention if older_than is None else older_than
        if not isinstance(older_than, timedelta) or older_than <= timedelta(0):
            raise ConfigError("prune needs a positive age: older_than= or the job_retention setting")
        if not isinstance(batch, int) or batch < 1:
            raise ConfigError("batch must be a positive integer")
        total = 0
        while (pruned := self.store.jobs_prune(older_than=older_than, limit=batch)):
            total += pruned
            if pruned < batch:
                break
        return total

    # -- failures: manual retry and the dead letters ---------------------------

    def retry(self, job_id: UUID | str, *, owner: str | None = None, by: str | None = None) -> Job:
        """Manual retry of a failed job: queued again with fresh attempts, at the
        stage that failed. ``owner``: the user the caller acts for, who must own
        the job; leave it out when an operator retries. ``by`` is recorded."""
        job = self.job(job_id)
        if owner is not None and job.owner != owner:
            raise Forbidden(f"job {job.id} belongs to someone else; only its owner or an operator may retry it")
        if job.status is not Status.FAILED:
            raise IllegalTransition(f"job {job.id} is {job.status}; only a failed job can be retried")
        revived = self.store.job_revive(job_id=job.id, reason="manual_retry", by=by or owner or "operator")
        if revived is None:
            raise IllegalTransition(f"job {job.id} was retried or replayed by someone else just now")
        return revived

    def dead_letters(
        self,
        *,
        error_class: str | None = None,
        stage: str | None = None,
        task: str | None = None,
        owner: str | None = None,
        state: str | None = None,
        older_than: timedelta | None = None,
        newer_than: timedelta | None = None,
        limit: int = 100,
    ) -> list[DeadLetter]:
        """Newest first. ``state``: "open", "replayed" or "escalated"; age is
        measured from the last failure."""
        if state not in (None, "open", "replayed", "escalated"):
            raise ConfigError(f"state must be open, replayed or escalated, not {state!r}")
        if not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ConfigError("limit must be an integer from 1 to 10000")
        return self.store.dead_letters_list(where=DeadLetterFilter(
            error_class=error_class, stage=stage, task=task, owner=owner, state=state,
            older_than=older_than, newer_than=newer_than, limit=limit,
        ))

    def dead_letter(self, dead_letter_id: int) -> DeadLetter:
        letter = self.store.dead_letter_get(id=_letter_id(dead_letter_id))
        if letter is None:
            raise DeadLetterNotFound(f"no dead letter has id {dead_letter_id}")
        return letter

    def note(self, dead_letter_id: int, text: str, *, by: str | None = None) -> DeadLetter:
        """Add a resolution note to a dead letter."""
        if not isinstance(text, str) or not text.strip() or len(text) > 2000:
            raise ConfigError("a note must be non-empty text of at most 2000 characters")
        return self.store.dead_letter_note(id=_letter_id(dead_letter_id), text=text.strip(), by=by)

    def replay(
        self, dead_letter_ids: Sequence[int], *, from_start: bool = False, by: str | None = None
    ) -> list[Replay]:
        """Queue the jobs of open dead letters again, resuming at the failed
        stage (or from the first with ``from_start``), with fresh attempts. A
        letter already replayed is left alone (``replayed=False``)."""
        done = []
        for dead_letter_id in dead_letter_ids:
            letter = self.dead_letter(dead_letter_id)
            job = None
            if letter.replayed_at is None:
                task = self.tasks.get(letter.task)
                job = self.store.job_revive(
                    job_id=letter.job_id, reason="replay", by=by or "operator",
                    from_start=from_start, first_stage=task.first_stage if task else None,
                    dead_letter_id=letter.id,
                )
            done.append(Replay(letter=self.dead_letter(letter.id), job=job))
        return done


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


def _json(value: Any, what: str) -> Any:
    try:
        strict_json(value)
    except (TypeError, ValueError) as exc:
        raise ArgumentsNotSerializable(f"job {what} are not JSON-serialisable: {exc}") from None
    return value


def _letter_id(value: int | str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise DeadLetterNotFound(f"{value!r} is not a dead letter id") from None
    if number < 1:
        raise DeadLetterNotFound(f"{value!r} is not a dead letter id")
    return number


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
