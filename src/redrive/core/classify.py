"""Classification: from an exception or an HTTP response to an error code.

Two steps. First, what happened, independent of any application: a ``Kind``
(timeout, connection refused, 429, 5xx, unparseable response, ...). Then the
application's ``Classifier`` maps kinds and status codes to its own codes
(the converter calls a 5xx ``GW_5XX``; the default taxonomy calls it
``UPSTREAM_5XX``). Exceptions from httpx and the standard library are
recognised by their class names, so the core imports neither.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any

from redrive.core.redact import redact_text
from redrive.core.taxonomy import DEFAULT_TAXONOMY, Taxonomy
from redrive.errors import ConfigError, Permanent, Transient

MESSAGE_LIMIT = 500


def one_line(text: object, limit: int = MESSAGE_LIMIT) -> str:
    """Messages are stored and shown as one line: redacted whole first (a
    secret cut in half is no longer recognisable), then whitespace folded
    and long ones cut."""
    line = " ".join(redact_text(str(text)).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def describe(exc: BaseException) -> str:
    """``Type: message``, even for an exception whose ``__str__`` raises."""
    try:
        text = str(exc)
    except Exception:
        text = "(its message could not be read)"
    return f"{type(exc).__name__}: {text}".rstrip(": ")


class Kind(StrEnum):
    TIMEOUT = "timeout"
    CONNECT = "connect"  # refused, unreachable, DNS
    NETWORK = "network"  # reset, broken pipe, protocol error mid-call
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    CONFLICT = "conflict"
    BAD_REQUEST = "bad_request"
    CONTEXT_TOO_LONG = "context_too_long"
    AUTH = "auth"
    NOT_FOUND = "not_found"
    RESPONSE_PARSE = "response_parse"
    RESPONSE_SCHEMA = "response_schema"


_CONTEXT_MARKERS = ("context_length_exceeded", "context window", "maximum context length",
                    "context length", "too many tokens")


def kind_of_status(status: int, body: str | None = None) -> Kind | None:
    """What an HTTP status says happened; None for success and redirects."""
    if status < 400:
        return None
    if status == 429:
        return Kind.RATE_LIMITED
    if status == 408:
        return Kind.TIMEOUT
    if status == 409:
        return Kind.CONFLICT
    if status in (401, 403):
        return Kind.AUTH
    if status in (404, 410):
        return Kind.NOT_FOUND
    if status == 400 and body and any(m in body.lower() for m in _CONTEXT_MARKERS):
        return Kind.CONTEXT_TOO_LONG
    if status >= 500:
        return Kind.SERVER_ERROR
    return Kind.BAD_REQUEST


_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,63}")


def provider_code(body: str | None) -> str | None:
    """The error code a provider put in a JSON answer (OpenAI's and
    Anthropic's ``{"error": {"code"|"type": ...}}``, or a top-level
    ``code``), so a failure says why: ``context_length_exceeded``, not just
    400. Only an identifier is taken, never the provider's free text, which
    may quote the request (a prompt) back."""
    if not body or not body.lstrip().startswith("{"):
        return None
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    error = answer.get("error") if isinstance(answer, dict) else None
    for holder, key in ((error, "code"), (error, "type"), (answer, "code")):
        value = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(value, str) and _CODE.fullmatch(value):
            return value
    return None


# (module prefix, class name) -> kind; the first match along the MRO wins.
_EXCEPTION_KINDS: tuple[tuple[str, str, Kind], ...] = (
    ("httpx", "TimeoutException", Kind.TIMEOUT),
    ("httpx", "ConnectError", Kind.CONNECT),
    ("httpx", "NetworkError", Kind.NETWORK),
    ("httpx", "RemoteProtocolError", Kind.NETWORK),
    ("builtins", "TimeoutError", Kind.TIMEOUT),
    ("builtins", "ConnectionRefusedError", Kind.CONNECT),
    ("socket", "gaierror", Kind.CONNECT),
    ("builtins", "ConnectionError", Kind.NETWORK),
    # redrive's own database errors met inside a job (its outbox's ``deliver``,
    # an enqueue from a task): the database unreachable, silent or locked for a
    # while is as transient as any other dependency; a refused statement is not
    ("redrive", "StoreTimeout", Kind.TIMEOUT),
    ("redrive", "StoreBusy", Kind.TIMEOUT),
    ("redrive", "StoreUnavailable", Kind.CONNECT),
    ("json", "JSONDecodeError", Kind.RESPONSE_PARSE),
    ("pydantic", "ValidationError", Kind.RESPONSE_SCHEMA),
    ("pydantic_core", "ValidationError", Kind.RESPONSE_SCHEMA),
    ("jsonschema", "ValidationError", Kind.RESPONSE_SCHEMA),
)


def _response_of(exc: BaseException) -> Any:
    return getattr(exc, "response", None) if type(exc).__name__ == "HTTPStatusError" else None


def kind_of_exception(exc: BaseException) -> Kind | None:
    if (response := _response_of(exc)) is not None:
        return kind_of_status(response.status_code, _text(response))
    for cls in type(exc).__mro__:
        for module, name, kind in _EXCEPTION_KINDS:
            if cls.__name__ == name and cls.__module__.split(".")[0] == module:
                return kind
    return None


def _text(response: Any) -> str | None:
    try:
        text = response.text
    except Exception:  # a streamed or undecodable body tells us nothing more
        return None
    return text if isinstance(text, str) else None


def parse_retry_after(value: str | None, *, now: datetime) -> timedelta | None:
    """``Retry-After`` as seconds or an HTTP date. Garbage, negatives and past
    dates give None, so the computed backoff applies."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # "²".isdigit() is True too
        try:
            return timedelta(seconds=int(value))
        except OverflowError:  # more seconds than timedelta holds: nonsense
            return None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    delay = when - now
    return delay if delay > timedelta(0) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """A classified failure: the code to record and whether to try again."""

    code: str
    retryable: bool
    message: str
    retry_after: timedelta | None = None
    upstream_status: int | None = None
    internal: str | None = None  # the code before the taxonomy's aliases, when it had one
    exception: str | None = None  # the exception's qualified class name

    @property
    def error_class(self) -> str:
        """The stable classification identifier dead letters and escalation use."""
        return self.internal or self.code


DEFAULT_KIND_CODES: Mapping[Kind, str] = {
    Kind.TIMEOUT: "NETWORK_TIMEOUT",
    Kind.CONNECT: "NETWORK_ERROR",
    Kind.NETWORK: "NETWORK_ERROR",
    Kind.RATE_LIMITED: "RATE_LIMITED",
    Kind.SERVER_ERROR: "UPSTREAM_5XX",
    Kind.CONFLICT: "CONFLICT",
    Kind.BAD_REQUEST: "VALIDATION_FAILED",
    Kind.CONTEXT_TOO_LONG: "CONTEXT_TOO_LONG",
    Kind.AUTH: "AUTH_DENIED",
    Kind.NOT_FOUND: "NOT_FOUND",
    Kind.RESPONSE_PARSE: "RESPONSE_INVALID",
    Kind.RESPONSE_SCHEMA: "RESPONSE_INVALID",
}


@dataclass(frozen=True)
class Classifier:
    """Maps what happened to an application's codes.

    ``statuses`` pins particular HTTP statuses to codes (the converter: 400, 406,
    413, 415 -> ``GW_4XX``) ahead of the kind mapping; ``unclassified`` is the
    code for an exception nobody recognised (a bug: not retried unless that
    code is retryable).
    """

    taxonomy: Taxonomy = DEFAULT_TAXONOMY
    kinds: Mapping[Kind, str] = field(default_factory=lambda: dict(DEFAULT_KIND_CODES))
    statuses: Mapping[int, str] = field(default_factory=dict)
    unclassified: str = "BUG"

    def __post_init__(self) -> None:
        for code in (*self.kinds.values(), *self.statuses.values(), self.unclassified):
            self.taxonomy.require(code)
        missing = set(Kind) - set(self.kinds)
        if missing:
            raise ConfigError(f"the classifier maps no code for {', '.join(sorted(missing))}")
        for status in self.statuses:
            if not 400 <= status <= 599:
                raise ConfigError(f"status {status} is not an HTTP error status")

    def _failure(self, code: str, message: str, **extra: Any) -> Failure:
        public = self.taxonomy.require(code)
        internal = code if code != public.name else None
        return Failure(code=public.name, retryable=public.retryable, message=message,
                       internal=internal, **extra)

    def response(
        self, status: int, *, headers: Mapping[str, str] | None = None, body: str | None = None,
        now: datetime,
    ) -> Failure | None:
        """Classify an HTTP response; None when it is not a failure."""
        kind = kind_of_status(status, body)
        if kind is None:
            return None
        code = self.statuses.get(status) or self.kinds[kind]
        retry_after = None
        if headers is not None:
            lowered = {k.lower(): v for k, v in headers.items()}
            retry_after = parse_retry_after(lowered.get("retry-after"), now=now)
        reason = provider_code(body)
        return self._failure(code, f"upstream answered HTTP {status}" + (f" ({reason})" if reason else ""),
                             retry_after=retry_after, upstream_status=status)

    def exception(self, exc: BaseException, *, now: datetime) -> Failure:
        """A task's own ``Transient``/``Permanent`` says what it means (its code
        shown through the taxonomy's aliases); anything else is recognised by
        kind, and what nobody recognises is ``unclassified``."""
        name = f"{type(exc).__module__}.{type(exc).__qualname__}".removeprefix("builtins.")
        if isinstance(exc, (Transient, Permanent)):
            known = self.taxonomy.public(exc.code)
            public = known.name if known else exc.code
            return Failure(
                code=public, retryable=isinstance(exc, Transient),
                message=one_line(exc.message),
                retry_after=exc.retry_after if isinstance(exc, Transient) else None,
                internal=exc.code if exc.code != public else None, exception=name,
            )
        if (response := _response_of(exc)) is not None:
            failure = self.response(response.status_code, headers=dict(response.headers),
                                    body=_text(response), now=now)
            if failure is not None:
                return replace(failure, exception=name)
        kind = kind_of_exception(exc)
        message = one_line(describe(exc))
        code = self.unclassified if kind is None else self.kinds[kind]
        return self._failure(code, message, exception=name)


DEFAULT_CLASSIFIER = Classifier()
