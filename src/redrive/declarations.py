"""What an application declares: its tasks, the dependencies behind circuit
breakers, its schedules and its classifier, held in one ``Registry``.

The runtime, the client and the operator API each receive the registry (or
nothing, when they work from a database URL alone), never the ``App`` that
built it.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

from redrive.core import checks
from redrive.core.alerts import Rule as AlertRule
from redrive.core.backoff import Backoff, FullJitter
from redrive.core.breaker import BreakerMode, BreakerPolicy
from redrive.core.classify import DEFAULT_CLASSIFIER, Classifier
from redrive.core.job import JSON, EnqueueResult
from redrive.core.limits import Limits, Rate, Rule
from redrive.core.schedule import Schedule
from redrive.core.stages import Stage
from redrive.errors import ConfigError, UnknownDependency, UnknownTask

P = ParamSpec("P")
R = TypeVar("R")

_DEPENDENCY_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True, slots=True)
class Dependency:
    """A downstream service behind a circuit breaker shared by every worker.

    ``mode``: HOLD keeps jobs that need it queued while it is open (no attempt
    spent); FAIL_FAST fails them at once with ``fail_code``, retried as that
    code says unless ``fail_for_good`` (then the job fails at once, for good:
    "immediately mark new dispatches as failed"). ``probe``, called
    by the workers while it is open (one worker per ``probe_interval``), returns
    True when the service looks healthy; without one, the policy's wait decides."""

    name: str
    policy: BreakerPolicy = field(default_factory=BreakerPolicy)
    mode: BreakerMode = BreakerMode.HOLD
    fail_code: str | None = None
    fail_for_good: bool = False
    probe: Callable[[], Any] | None = None
    probe_interval: timedelta = timedelta(seconds=5)
    rate: Rate | None = None  # at most this many starts of jobs that need it, across every worker

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _DEPENDENCY_NAME.match(self.name):
            raise ConfigError(f"dependency name {self.name!r} must be 1-64 letters, digits, '-', '_' or '.'")
        if self.mode not in tuple(BreakerMode):
            raise ConfigError(f"dependency {self.name!r}: mode must be one of {', '.join(BreakerMode)}, not {self.mode!r}")
        if BreakerMode(self.mode) is BreakerMode.FAIL_FAST and not self.fail_code:
            raise ConfigError(f"dependency {self.name!r} fails fast: give it a fail_code (such as GW_5XX)")
        if self.probe_interval <= timedelta(0):
            raise ConfigError("probe_interval must be longer than zero")
        if self.rate is not None and not isinstance(self.rate, Rate):
            raise ConfigError(f"dependency {self.name!r}: rate is a redrive.Rate(count, per=timedelta(...))")


@dataclass(frozen=True, slots=True)
class Task(Generic[P, R]):
    """A function registered with an app; calling it runs the function directly."""

    name: str
    fn: Callable[P, R]
    queue: str = "default"
    priority: int = 0
    max_attempts: int | None = None
    backoff: Backoff = field(default_factory=FullJitter)
    classifier: Classifier | None = None  # None: the app's
    stages: tuple[Stage, ...] = ()  # empty: a plain task, one stage named after it
    dependencies: tuple[str, ...] = ()  # breakers its calls go through
    already_done: Callable[..., Any] | None = None  # the job's arguments -> its result if the work exists, else None
    timeout: timedelta | None = None  # one run; None: no limit
    hard_timeout: timedelta | None = None  # one run, enforced by killing its worker process (docs/processes.md)
    max_snoozes: int = 100  # redrive.Snooze asked at most this often per job; then it fails SNOOZE_LIMIT
    # How task.enqueue reaches a client: set by the App that registered the task.
    enqueuer: Enqueuer | None = field(default=None, repr=False, compare=False)
    # Known once: asking inspect costs a few µs, and the worker asks for every job.
    is_async: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Checked here, however the task is made, so an enqueue takes the
        # task's own options as they are and checks only what the caller gives.
        checks.queue_name(self.queue)
        checks.priority(self.priority)
        checks.max_attempts(self.max_attempts)
        if isinstance(self.max_snoozes, bool) or not isinstance(self.max_snoozes, int) or self.max_snoozes < 0:
            raise ConfigError(f"max_snoozes must be a whole number of zero or more, not {self.max_snoozes!r}")
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.fn))

    @property
    def first_stage(self) -> str:
        return self.stages[0].name if self.stages else self.name

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueResult:
        """Enqueue a job of this task: ``send_welcome.enqueue(42)``. The
        arguments are the function's own, so a type checker checks them; with
        options (a queue, a delay, a key), ``send_welcome.options(delay=...).enqueue(42)``."""
        return Enqueuing(self, {}).enqueue(*args, **kwargs)

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueResult:
        """``enqueue`` without blocking the event loop (see ``Client.enqueue_async``)."""
        return await Enqueuing(self, {}).enqueue_async(*args, **kwargs)

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call:
        """This task with its arguments, not enqueued: a step of a workflow
        (``redrive.Workflow``). The arguments are checked as ``enqueue``'s are."""
        return Enqueuing(self, {}).call(*args, **kwargs)

    def options(
        self, *, queue: str | None = None, priority: int | None = None, run_at: datetime | None = None,
        delay: timedelta | None = None, owner: str | None = None, max_attempts: int | None = None,
        idempotency_key: str | None = None, version: int = 1, dedupe: Sequence[Any] | None = None,
        conn: Any = None,
    ) -> Enqueuing[P]:
        """This task with enqueue options set (see ``Client.enqueue``)."""
        chosen = {"queue": queue, "priority": priority, "run_at": run_at, "delay": delay, "owner": owner,
                  "max_attempts": max_attempts, "idempotency_key": idempotency_key, "version": version,
                  "dedupe": dedupe, "conn": conn}
        return Enqueuing(self, {k: v for k, v in chosen.items() if v is not None})


@dataclass(frozen=True, slots=True)
class JobRequest:
    """One job to enqueue. Unset options fall back to the task's, then the app's."""

    task: str | Task[Any, Any]
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


# What a workflow's step may choose of enqueue's options: the rest (a due
# time, a key, an owner) belong to the workflow or make no sense for a step.
STEP_OPTIONS = frozenset({"queue", "priority", "max_attempts"})


@dataclass(frozen=True, slots=True)
class Call:
    """A task, its arguments and its options, not enqueued yet: a workflow's step."""

    task: Task[Any, Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)


class Enqueuer(Protocol):
    """Where a task's ``enqueue`` goes: its app."""

    def enqueue(self, task: Task[Any, Any], **options: Any) -> EnqueueResult: ...

    async def enqueue_async(self, task: Task[Any, Any], **options: Any) -> EnqueueResult: ...


class Enqueuing(Generic[P]):
    """A task with enqueue options chosen, waiting for its arguments."""

    def __init__(self, task: Task[P, Any], options: dict[str, Any]) -> None:
        self._task = task
        self._options = options

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        task = self._task
        if task.enqueuer is None:
            raise ConfigError(f"task {task.name!r} is not registered with an app: declare it with @app.task")
        try:  # a mistake here is the caller's, not a job that fails as a bug later
            inspect.signature(task.fn).bind(*args, **kwargs)
        except TypeError as exc:
            raise ConfigError(f"task {task.name!r} cannot take these arguments: {exc}") from None
        return list(args), dict(kwargs)

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call:
        """A workflow's step of this task with these options (queue, priority, max_attempts)."""
        positional, named = self._call(args, kwargs)
        chosen = {k for k, v in self._options.items() if not (k == "version" and v == 1)}  # 1: options()' default
        if other := sorted(chosen - STEP_OPTIONS):
            raise ConfigError(f"a workflow's step cannot take {', '.join(other)}: "
                              f"a step chooses only {', '.join(sorted(STEP_OPTIONS))}")
        return Call(self._task, tuple(positional), named, dict(self._options))

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueResult:
        positional, named = self._call(args, kwargs)
        assert self._task.enqueuer is not None
        return self._task.enqueuer.enqueue(self._task, args=positional, kwargs=named, **self._options)

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueResult:
        positional, named = self._call(args, kwargs)
        assert self._task.enqueuer is not None
        return await self._task.enqueuer.enqueue_async(self._task, args=positional, kwargs=named, **self._options)


class Registry:
    """The declarations of one application, looked up by name."""

    def __init__(self, *, classifier: Classifier = DEFAULT_CLASSIFIER) -> None:
        self.classifier = classifier
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.dependencies: dict[str, Dependency] = {}
        self.schedules: dict[str, Schedule] = {}
        self.queue_rules: dict[str, Rule] = {}  # queue:NAME and owner:NAME keys (core/limits.py)
        self.alert_rules: dict[str, AlertRule] = {}

    def add_alert(self, rule: AlertRule) -> None:
        if not callable(getattr(rule, "check", None)) or not isinstance(getattr(rule, "name", None), str):
            raise ConfigError("an alert rule is one of redrive.alerts' rules (or has a name and check())")
        if rule.name in self.alert_rules:
            raise ConfigError(f"alert rule {rule.name!r} is declared twice")
        self.alert_rules[rule.name] = rule

    @property
    def limits(self) -> Limits:
        """Every limit shared through the store: the queues' and the dependencies' rates."""
        rules = dict(self.queue_rules)
        rules.update({f"dependency:{d.name}": Rule(rate=d.rate) for d in self.dependencies.values() if d.rate})
        return Limits(rules)

    def add_queue(self, name: str, *, concurrency: int | None, rate: Rate | None, rate_per_owner: Rate | None) -> None:
        if f"queue:{name}" in self.queue_rules or f"owner:{name}" in self.queue_rules:
            raise ConfigError(f"queue {name!r} is declared twice")
        if concurrency is not None and (not isinstance(concurrency, int) or isinstance(concurrency, bool)
                                        or concurrency < 1):
            raise ConfigError(f"queue {name!r}: concurrency must be a whole number of at least 1")
        for given in (rate, rate_per_owner):
            if given is not None and not isinstance(given, Rate):
                raise ConfigError(f"queue {name!r}: a rate is a redrive.Rate(count, per=timedelta(...))")
        if concurrency is not None or rate is not None:
            self.queue_rules[f"queue:{name}"] = Rule(concurrency=concurrency, rate=rate)
        if rate_per_owner is not None:
            self.queue_rules[f"owner:{name}"] = Rule(rate=rate_per_owner)

    def task(self, task: str | Task[Any, Any]) -> Task[Any, Any]:
        name = task.name if isinstance(task, Task) else task
        if name not in self.tasks:
            known = ", ".join(sorted(self.tasks)) or "none"
            raise UnknownTask(f"no task named {name!r} is registered (known: {known})", task=name)
        return self.tasks[name]

    def dependency(self, name: str) -> Dependency:
        if name not in self.dependencies:
            known = ", ".join(sorted(self.dependencies)) or "none"
            raise UnknownDependency(f"no dependency named {name!r} is declared (known: {known})")
        return self.dependencies[name]

    def add_task(self, task: Task[Any, Any]) -> None:
        if task.name in self.tasks and self.tasks[task.name].fn is not task.fn:
            raise ConfigError(f"two tasks are named {task.name!r}; pass name= to tell them apart")
        self.tasks[task.name] = task

    def add_dependency(self, dependency: Dependency) -> None:
        if dependency.name in self.dependencies:
            raise ConfigError(f"dependency {dependency.name!r} is declared twice")
        if dependency.fail_code:
            self.classifier.taxonomy.require(dependency.fail_code)
        self.dependencies[dependency.name] = dependency

    def add_schedule(self, schedule: Schedule) -> None:
        if schedule.name in self.schedules:
            raise ConfigError(f"schedule {schedule.name!r} is declared twice")
        self.schedules[schedule.name] = schedule

    def first_stage(self, task: str) -> str | None:
        """Where a job of ``task`` starts; None when this registry does not know the task."""
        declared = self.tasks.get(task)
        return declared.first_stage if declared else None
