"""How a handler's run ended, decided before storage is touched."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from redrive.core.job import JSON


@dataclass(frozen=True, slots=True)
class Succeeded:
    result: JSON


@dataclass(frozen=True, slots=True)
class Retry:
    delay: timedelta
    error_code: str
    error_message: str


@dataclass(frozen=True, slots=True)
class Failed:
    error_code: str
    error_message: str


Outcome = Succeeded | Retry | Failed
