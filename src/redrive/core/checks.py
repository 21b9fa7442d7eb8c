"""Checks on values users hand to the engine, shared by declarations, the
client and the operator API: each returns the value or raises one of our
errors with a one-line message."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from redrive.core.job import strict_json
from redrive.errors import ArgumentsNotSerializable, ConfigError, DeadLetterNotFound, JobNotFound

SMALLINT = range(-32768, 32768)


def queue_name(queue: Any) -> str:
    if not isinstance(queue, str) or not queue.strip():
        raise ConfigError("a queue name must be a non-empty string")
    return queue


def priority(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in SMALLINT:
        raise ConfigError(f"priority must be an integer from {SMALLINT.start} to {SMALLINT.stop - 1}")
    return value


def max_attempts(value: Any) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError("max_attempts must be an integer of at least 1")
    return value


def json_value(value: Any, what: str) -> Any:
    try:
        strict_json(value)
    except (TypeError, ValueError) as exc:
        raise ArgumentsNotSerializable(f"job {what} are not JSON-serialisable: {exc}") from None
    return value


def job_uuid(job_id: UUID | str) -> UUID:
    if isinstance(job_id, UUID):
        return job_id
    try:
        return UUID(job_id)
    except (TypeError, ValueError, AttributeError):
        raise JobNotFound(f"{job_id!r} is not a job id") from None


def letter_id(value: int | str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise DeadLetterNotFound(f"{value!r} is not a dead letter id") from None
    if number < 1:
        raise DeadLetterNotFound(f"{value!r} is not a dead letter id")
    return number
