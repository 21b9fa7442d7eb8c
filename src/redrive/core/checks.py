"""Checks on values users hand to the engine, shared by declarations, the
client and the operator API: each returns the value or raises one of our
errors with a one-line message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from redrive.core.job import strict_json
from redrive.errors import (
    ArgumentsNotSerializable,
    ConfigError,
    DeadLetterNotFound,
    JobNotFound,
    RedriveError,
    WorkflowNotFound,
)

SMALLINT = range(-32768, 32768)


def queue_name(queue: Any) -> str:
    if not isinstance(queue, str) or not queue.strip():
        raise ConfigError("a queue name must be a non-empty string")
    return text(queue, "a queue name")


# One rule for every store: a value is accepted only if each store can keep
# it and give it back equal. PostgreSQL refuses NUL in text and lone
# surrogates in JSON, and nothing can send a lone surrogate as UTF-8 (a page,
# an API answer, a log line), so both are refused where they enter.
def text_problem(value: str) -> str | None:
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate, which is not valid Unicode"
    return None


def text(value: str, what: str) -> str:
    """``value`` unchanged, or ConfigError if a store could not keep it."""
    problem = text_problem(value)
    if problem is not None:
        raise ConfigError(f"{what} {problem}")
    return value


def owner(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError("an owner must be a non-empty string")
    return text(value, "an owner")


# Times a job may be due at: what Python's datetime, PostgreSQL's timestamptz
# and SQLite's epoch seconds (a float: exact to the microsecond until 2242)
# all keep exactly. A time before 1970 is a mistake (a default of
# datetime.min), not a schedule.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
LONGEST_DELAY = timedelta(days=365 * 100)


def run_at(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ConfigError(f"run_at is a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ConfigError("run_at must be timezone-aware (give it a tzinfo, such as timezone.utc)")
    if not EARLIEST <= utc(value, "run_at") < LATEST:
        raise ConfigError(f"run_at must fall between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d} (UTC)")
    return value


# What a store answers for a stored time Python cannot hold (one written
# before these checks refused it, or by hand in SQL): the nearest time it
# can, so a list still shows the row, and a claim sets its job aside.
TIME_FLOOR = datetime.min.replace(tzinfo=UTC)
TIME_CEILING = datetime.max.replace(tzinfo=UTC)


def stored_problem(job_run_at: datetime, payload_text: str | None, payload: Any) -> str | None:
    """Why a claimed job cannot be run as stored, or None. ``payload_text``
    (the stored JSON, where a store has it) lets the common case skip the walk."""
    if job_run_at in (TIME_FLOOR, TIME_CEILING):
        return "its run_at is outside the years 1 to 9999"
    if payload_text is None or "\\u" in payload_text:
        return _unkept(payload, "its arguments")
    return None


def utc(value: datetime, what: str) -> datetime:
    """An aware time in UTC, or ConfigError if UTC has no such time (year 1 at +14:00)."""
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ConfigError(f"{what} must fall between the years 1 and 9999 in UTC") from None


def delay(value: Any) -> timedelta | None:
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise ConfigError(f"delay is a timedelta, such as timedelta(seconds=30), not {value!r}")
    if value < timedelta(0):
        raise ConfigError("delay cannot be negative")
    if value > LONGEST_DELAY:
        raise ConfigError(f"delay must be at most {LONGEST_DELAY.days:,} days")
    return value


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
    if not value and type(value) in (list, dict):
        return None  # most jobs leave args or kwargs empty: nothing to encode
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
    # Only an escape (non-ASCII or control characters) or an exponent can
    # hide a value a store would not keep; plain ASCII text is walked never.
    if "\\u" in text or "e+" in text:
        return _unkept(value, what)
    return None


def _unkept(value: Any, what: str) -> str | None:
    """The first string or number in ``value`` some store would not give back equal."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                return f"{what}: a string {problem}"
        elif isinstance(item, float):
            # PostgreSQL keeps a number's decimal digits: 1e+23 reads back as
            # the integer 10**23, which is not the float 1e23
            if abs(item) >= 1e16 and Decimal(int(item)) != Decimal(repr(item)):
                return (f"{what}: the number {item!r} would not read back exactly on every store;"
                        " send it as a string")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
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
    return _uuid(job_id, JobNotFound, "a job id")


def workflow_uuid(workflow_id: UUID | str) -> UUID:
    return _uuid(workflow_id, WorkflowNotFound, "a workflow id")


def _uuid(value: UUID | str, not_found: type[RedriveError], what: str) -> UUID:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(value)
    except (TypeError, ValueError, AttributeError):
        raise not_found(f"{value!r} is not {what}") from None


def letter_id(value: int | str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise DeadLetterNotFound(f"{value!r} is not a dead letter id") from None
    if not 1 <= number < 2**63:  # both stores keep ids as 64-bit integers
        raise DeadLetterNotFound(f"{value!r} is not a dead letter id")
    return number
