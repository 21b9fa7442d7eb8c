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


# One limit for what a job carries, checked where it enters (enqueue) and
# where it leaves a task (its result): deeper or bigger values break readers
# (a page, a `jobs show`, a JSON parser with a recursion limit) long after
# they were accepted.
MAX_DEPTH = 64  # levels of nested lists and objects
MAX_BYTES = 1_000_000  # encoded as JSON


def payload_problem(value: Any, what: str) -> str | None:
    """Why ``value`` cannot be a job's arguments or result, or None."""
    try:
        text = strict_json(value)
    except RecursionError:
        return f"{what}: nested deeper than {MAX_DEPTH} levels"
    except (TypeError, ValueError) as exc:
        return f"{what}: not JSON-serialisable: {exc}"
    if len(text) > MAX_BYTES:
        return f"{what}: {len(text):,} characters as JSON, over the limit of {MAX_BYTES:,}"
    # brackets are counted only when there are enough of them to matter
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        return f"{what}: nested deeper than {MAX_DEPTH} levels"
    return None


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:  # no recursion: the value may be as deep as the encoder allowed
        item, depth = stack.pop()
        if isinstance(item, (list, tuple, dict)):
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def json_value(value: Any, what: str) -> Any:
    problem = payload_problem(value, f"job {what}")
    if problem is not None:
        raise ArgumentsNotSerializable(problem)
    return value


def job_args(args: Any) -> list[Any]:
    """A job's positional arguments: a list or a tuple, never a string or a mapping taken apart."""
    if isinstance(args, (str, bytes, dict)) or not isinstance(args, (list, tuple)):
        raise ConfigError(f"args must be a list of the task's positional arguments, not {type(args).__name__}")
    return list(args)


def job_kwargs(kwargs: Any) -> dict[str, Any]:
    if not isinstance(kwargs, dict) or not all(isinstance(key, str) for key in kwargs):
        raise ConfigError(f"kwargs must be an object with string keys, not {type(kwargs).__name__}")
    return dict(kwargs)


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
    if not 1 <= number < 2**63:  # both stores keep ids as 64-bit integers
        raise DeadLetterNotFound(f"{value!r} is not a dead letter id")
    return number
