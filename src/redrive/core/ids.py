"""Deterministic identities: job ids from idempotency keys, argument
fingerprints, content keys and outbox tokens. The same inputs give the same
value on every machine and in every release."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any
from uuid import UUID, SafeUUID, uuid5

from redrive.core import checks
from redrive.errors import ConfigError

# Fixed forever: changing it would change every deterministic id already stored.
NAMESPACE = UUID("6f1c9a52-5d0e-4f7b-9a43-0c2be8f1d7a1")

MAX_KEY_LENGTH = 255

_UNKNOWN = SafeUUID.unknown


def uuid_of(number: int) -> UUID:
    """``UUID(int=number)`` for a number known to fit in 128 bits, at half the
    cost: the constructor checks its range and looks the enum member up through
    its class, a third of the call in Python 3.11. For ids made or read a job
    at a time (new ids, ids read back from SQLite)."""
    made = object.__new__(UUID)
    object.__setattr__(made, "int", number)
    object.__setattr__(made, "is_safe", _UNKNOWN)
    return made


def uuid_from_text(text: str) -> UUID:
    """A UUID from the hyphenated text redrive stores (``str(uuid)``): a
    ValueError for anything that is not hexadecimal, as ``UUID(text)``."""
    return uuid_of(int(text.replace("-", ""), 16))


def canonical(value: Any) -> str:
    """One JSON text per value: sorted keys, no spaces, no NaN."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def idempotency_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise ConfigError("an idempotency key must be a non-empty string")
    if len(key) > MAX_KEY_LENGTH:
        raise ConfigError(f"an idempotency key must be at most {MAX_KEY_LENGTH} characters, not {len(key)}")
    return checks.text(key, "an idempotency key")


def version(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"version must be a positive integer, not {value!r}")
    return value


def job_id_for(task: str, key: str, version: int = 1, owner: str | None = None) -> UUID:
    """The id of the run of ``key`` at ``version`` (UUIDv5, as the matchmaking scheduler needs)."""
    return uuid5(NAMESPACE, canonical(["job", task, owner or "", key, version]))


def fingerprint(args: Sequence[Any], kwargs: Any) -> str:
    """Tells whether two enqueues under one key asked for the same work."""
    return _sha256(canonical([list(args), kwargs]))


def content_key(parts: Sequence[Any]) -> str:
    """The key of a content tuple such as (owner, sha256, mapping, size)."""
    if isinstance(parts, (str, bytes)) or not isinstance(parts, Sequence) or not parts:
        raise ConfigError("dedupe takes a non-empty tuple of JSON values, such as (owner, sha256, size)")
    problem = checks.payload_problem(list(parts), "dedupe values must be JSON")
    if problem is not None:
        raise ConfigError(problem)
    try:
        return "content:" + _sha256(canonical(list(parts)))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"dedupe values must be JSON: {exc}") from None


def outbox_token(key: Sequence[Any]) -> str:
    """The provider idempotency token of a delivery: derived from its key alone,
    so every retry of the same intent presents the same token."""
    return str(uuid5(NAMESPACE, canonical(["outbox", list(key)])))
