"""Error codes: a name, whether it may be retried, and a one-line message for users.

A ``Taxonomy`` is the set of codes an application speaks, plus aliases that
map internal codes to public ones (the converter: ``GW_UNAVAILABLE`` is shown
as ``GW_5XX``). The engine's own codes are in every taxonomy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from redrive.errors import ConfigError

_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")


@dataclass(frozen=True, slots=True)
class ErrorCode:
    name: str
    retryable: bool
    message: str

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigError(f"error code {self.name!r} must be UPPER_SNAKE_CASE, at most 64 characters")
        if not self.message or "\n" in self.message or len(self.message) > 200:
            raise ConfigError(f"the message of {self.name} must be one line of at most 200 characters")


# Codes the engine itself records; an application taxonomy cannot redefine them.
ENGINE_CODES = (
    ErrorCode("TRANSIENT", True, "A temporary problem stopped the job; it will be retried."),
    ErrorCode("PERMANENT", False, "The job cannot succeed as it is."),
    ErrorCode("BUG", False, "Something went wrong on our side; engineers have been told."),
    ErrorCode("UNKNOWN_TASK", True, "No worker here knows this task yet; it will be retried."),
    ErrorCode("RESULT_NOT_JSON", False, "The job finished but its result could not be stored."),
    ErrorCode("LEASE_EXPIRED", False, "The job's worker stopped responding too many times."),
    ErrorCode("TIMEOUT", True, "The job ran past its time limit; it will be retried."),
)

# The criticizer's failure table, one code per category (and the matching system's LLM cases).
DEFAULT_CODES = (
    ErrorCode("NETWORK_ERROR", True, "A network problem interrupted the call; it will be retried."),
    ErrorCode("NETWORK_TIMEOUT", True, "The call took too long; it will be retried."),
    ErrorCode("RATE_LIMITED", True, "The service asked us to slow down; it will be retried."),
    ErrorCode("UPSTREAM_5XX", True, "The service is having a problem; it will be retried."),
    ErrorCode("CONFLICT", True, "A concurrent change got in the way; it will be retried."),
    ErrorCode("RESPONSE_INVALID", True, "The service answered with something unusable; it will be retried."),
    ErrorCode("VALIDATION_FAILED", False, "The request is invalid and needs correcting."),
    ErrorCode("CONTEXT_TOO_LONG", False, "The input is too long for the model."),
    ErrorCode("AUTH_DENIED", False, "Access was denied; credentials or permissions need fixing."),
    ErrorCode("NOT_FOUND", False, "Something the job needs does not exist."),
    ErrorCode("POLICY_REJECTED", False, "The request was rejected by a policy."),
)


class Taxonomy:
    def __init__(self, codes: Iterable[ErrorCode], *, aliases: Mapping[str, str] | None = None) -> None:
        self._codes: dict[str, ErrorCode] = {}
        for code in (*ENGINE_CODES, *codes):
            if code.name in self._codes and self._codes[code.name] != code:
                raise ConfigError(f"error code {code.name} is declared twice")
            self._codes[code.name] = code
        self._aliases = dict(aliases or {})
        for internal, public in self._aliases.items():
            if not _NAME.match(internal):
                raise ConfigError(f"internal code {internal!r} must be UPPER_SNAKE_CASE")
            if internal in self._codes:
                raise ConfigError(f"{internal} is a public code; it cannot also be an alias")
            if public not in self._codes:
                raise ConfigError(f"alias {internal} points at {public}, which is not a declared code")

    def __contains__(self, name: object) -> bool:
        return name in self._codes or name in self._aliases

    def __iter__(self) -> Iterator[ErrorCode]:
        return iter(self._codes.values())

    def public(self, name: str) -> ErrorCode | None:
        """The public code for ``name`` (itself, or what it is an alias of)."""
        return self._codes.get(self._aliases.get(name, name))

    def require(self, name: str) -> ErrorCode:
        code = self.public(name)
        if code is None:
            raise ConfigError(f"{name} is not an error code of this taxonomy")
        return code


DEFAULT_TAXONOMY = Taxonomy(DEFAULT_CODES)
