"""How a handler's run ended, decided before storage is touched."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from redrive.core.classify import Failure
from redrive.core.job import JSON
from redrive.core.workflow import NewWorkflow


@dataclass(frozen=True, slots=True)
class Succeeded:
    result: JSON


@dataclass(frozen=True, slots=True)
class Retry:
    delay: timedelta
    failure: Failure


@dataclass(frozen=True, slots=True)
class Failed:
    failure: Failure


@dataclass(frozen=True, slots=True)
class Stopped:
    """The run stopped because a cancel was asked (``by`` names who asked),
    or the task ended itself cancelled (``by`` is "task")."""

    by: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Snoozed:
    """The task asked to run again after ``delay``: no attempt spent;
    ``count`` is this job's snoozes with this one."""

    delay: timedelta
    count: int


Outcome = Succeeded | Retry | Failed | Stopped | Snoozed


@dataclass(frozen=True, slots=True)
class Execution:
    """An outcome and what the store records with it."""

    outcome: Outcome
    stage: str | None = None
    stage_attempts: dict[str, int] | None = None
    stack: str | None = None  # redacted; only for a final failure
    context: dict[str, JSON] = field(default_factory=dict)  # sanitized
    held_by: str | None = None  # a guarded call found this dependency open
    guarded: frozenset[str] = frozenset()  # dependencies whose calls were wrapped
    skipped: bool = False  # the task's already_done found the result: the body did not run
    told: dict[str, JSON] = field(default_factory=dict)  # the task's add_context, redacted: on the ending's event
    spawned: tuple[NewWorkflow, ...] = ()  # created with the success, never without it
    lease_lost: bool = False  # the run found its lease gone (LeaseLost): nothing is written
