"""How a handler's run ended, decided before storage is touched."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from redrive.core.classify import Failure
from redrive.core.job import JSON


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
class Cancelled:
    """The run stopped because a cancel was asked (``by`` names who asked),
    or the task ended itself cancelled (``by`` is "task")."""

    by: str
    reason: str | None = None


Outcome = Succeeded | Retry | Failed | Cancelled
