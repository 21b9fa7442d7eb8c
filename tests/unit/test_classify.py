"""Table-driven classification: every row of seed 001 §8.1, seed 000's table
and seed 002 §2B's status mapping, with the seeds' own taxonomies."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta

import httpx
import pydantic
import pytest

from redrive.core.classify import DEFAULT_CLASSIFIER, Classifier, Kind
from redrive.core.taxonomy import ErrorCode, Taxonomy
from redrive.errors import ConfigError, StoreBusy, StoreError, StoreTimeout, StoreUnavailable

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
REQUEST = httpx.Request("POST", "http://127.0.0.1/llm")


def status_error(status: int, body: str = "", headers: dict | None = None) -> httpx.HTTPStatusError:
    response = httpx.Response(status, text=body, headers=headers or {}, request=REQUEST)
    return httpx.HTTPStatusError(f"HTTP {status}", request=REQUEST, response=response)


class Answer(pydantic.BaseModel):
    matches: list[int]


def schema_error() -> pydantic.ValidationError:
    try:
        Answer.model_validate({"matches": "nope"})
    except pydantic.ValidationError as exc:
        return exc
    raise AssertionError("pydantic accepted an invalid answer")


def parse_error() -> json.JSONDecodeError:
    try:
        json.loads("{not json")
    except json.JSONDecodeError as exc:
        return exc
    raise AssertionError


# (seed, case, exception, code, retryable)
SEED_001 = [
    ("DNS failure", socket.gaierror(-3, "Temporary failure in name resolution"), "NETWORK_ERROR", True),
    ("socket timeout", TimeoutError("timed out"), "NETWORK_TIMEOUT", True),
    ("TCP reset", ConnectionResetError(104, "Connection reset by peer"), "NETWORK_ERROR", True),
    ("httpx read timeout", httpx.ReadTimeout("read timed out", request=REQUEST), "NETWORK_TIMEOUT", True),
    ("502", status_error(502), "UPSTREAM_5XX", True),
    ("503", status_error(503), "UPSTREAM_5XX", True),
    ("504", status_error(504), "UPSTREAM_5XX", True),
    ("429", status_error(429, '{"error": "rate_limit_exceeded"}'), "RATE_LIMITED", True),
    ("LLM internal_error", status_error(500, '{"error": {"type": "internal_error"}}'), "UPSTREAM_5XX", True),
    ("version conflict", status_error(409), "CONFLICT", True),
    ("malformed payload", status_error(400, '{"error": "missing field"}'), "VALIDATION_FAILED", False),
    ("schema mismatch", status_error(422), "VALIDATION_FAILED", False),
    ("invalid API key", status_error(401), "AUTH_DENIED", False),
    ("permission denied", status_error(403), "AUTH_DENIED", False),
    ("immutable input gone", status_error(404), "NOT_FOUND", False),
    ("destination deleted", status_error(410), "NOT_FOUND", False),
    ("null dereference", AttributeError("'NoneType' object has no attribute 'x'"), "BUG", False),
    ("invariant violation", AssertionError("state drifted"), "BUG", False),
    ("bad deploy config", KeyError("GATEWAY_URL"), "BUG", False),
    # redrive's own database errors, met by a job that uses the store (the outbox's deliver)
    ("the job's database unreachable", StoreUnavailable("lost PostgreSQL at db:5432/app: the server is not answering"),
     "NETWORK_ERROR", True),
    ("the job's database silent past its deadline", StoreTimeout("PostgreSQL at db did not answer"),
     "NETWORK_TIMEOUT", True),
    ("the job's database locked", StoreBusy("SQLite database jobs.db stayed locked for 30 s"), "NETWORK_TIMEOUT", True),
    ("the job's statement refused", StoreError("PostgreSQL refused the operation: syntax error"), "BUG", False),
]

SEED_000 = [
    ("HTTP 429", status_error(429), "RATE_LIMITED", True),
    ("HTTP 5xx", status_error(500), "UPSTREAM_5XX", True),
    ("network timeout", httpx.ConnectTimeout("connect timed out", request=REQUEST), "NETWORK_TIMEOUT", True),
    ("connection refused", ConnectionRefusedError(111, "Connection refused"), "NETWORK_ERROR", True),
    ("httpx connection refused", httpx.ConnectError("[Errno 111] Connection refused", request=REQUEST),
     "NETWORK_ERROR", True),
    ("LLM response parse failure", parse_error(), "RESPONSE_INVALID", True),
    ("LLM response schema failure", schema_error(), "RESPONSE_INVALID", True),
    ("HTTP 400 context window exceeded",
     status_error(400, '{"error": {"code": "context_length_exceeded"}}'), "CONTEXT_TOO_LONG", False),
    ("HTTP 401", status_error(401), "AUTH_DENIED", False),
    ("HTTP 403", status_error(403), "AUTH_DENIED", False),
]


@pytest.mark.parametrize(("case", "exc", "code", "retryable"), SEED_001 + SEED_000,
                         ids=[row[0] for row in SEED_001 + SEED_000])
def test_default_classification(case, exc, code, retryable) -> None:
    failure = DEFAULT_CLASSIFIER.exception(exc, now=NOW)
    assert (failure.code, failure.retryable) == (code, retryable), case
    assert "\n" not in failure.message


SEED_002 = Taxonomy(
    [
        ErrorCode("NOT_PDF", False, "Only PDF files are supported."),
        ErrorCode("TOO_LARGE", False, "File exceeds 50 MB limit."),
        ErrorCode("GW_4XX", False, "Couldn’t convert this file with the selected mapping."),
        ErrorCode("GW_5XX", True, "Converter service is having an issue. We’ll retry shortly."),
        ErrorCode("GW_TIMEOUT", True, "Conversion is taking too long. We’ll retry."),
        ErrorCode("IO_ERROR", True, "Temporary storage issue. We’ll retry."),
        ErrorCode("NOT_READY", False, "Conversion not finished yet."),
        ErrorCode("EXPIRED", False, "File was removed by retention. Re-upload to regenerate."),
        ErrorCode("FORBIDDEN", False, "This file isn’t yours."),
        ErrorCode("UNKNOWN", False, "Something went wrong."),
    ],
    # seed 003 §3.1: internal nuances shown as the public codes
    aliases={"GW_UNAVAILABLE": "GW_5XX", "PARSE_ERROR": "GW_4XX", "VALIDATION_ERROR": "GW_4XX",
             "INVALID_MAPPING": "GW_4XX", "MEMORY_ERROR": "UNKNOWN"},
)
GATEWAY = Classifier(
    taxonomy=SEED_002,
    kinds={kind: "GW_5XX" for kind in Kind} | {Kind.TIMEOUT: "GW_TIMEOUT"},
    statuses={400: "GW_4XX", 406: "GW_4XX", 413: "GW_4XX", 415: "GW_4XX"},
    unclassified="UNKNOWN",
)


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [(400, "GW_4XX", False), (406, "GW_4XX", False), (413, "GW_4XX", False), (415, "GW_4XX", False),
     (500, "GW_5XX", True), (502, "GW_5XX", True), (503, "GW_5XX", True), (504, "GW_5XX", True)],
)
def test_seed_002_gateway_status_mapping(status, code, retryable) -> None:
    failure = GATEWAY.response(status, now=NOW)
    assert (failure.code, failure.retryable, failure.upstream_status) == (code, retryable, status)
    assert GATEWAY.exception(status_error(status), now=NOW).code == code


def test_seed_002_network_errors_and_timeouts() -> None:
    assert GATEWAY.exception(httpx.ConnectError("refused", request=REQUEST), now=NOW).code == "GW_5XX"
    assert GATEWAY.exception(httpx.ReadTimeout("slow", request=REQUEST), now=NOW).code == "GW_TIMEOUT"
    assert GATEWAY.exception(ValueError("?"), now=NOW).code == "UNKNOWN"
    assert SEED_002.public("GW_UNAVAILABLE").name == "GW_5XX"
    assert SEED_002.public("INVALID_MAPPING").message.startswith("Couldn’t convert")


def test_success_is_not_a_failure_and_retry_after_is_read_in_both_forms() -> None:
    assert DEFAULT_CLASSIFIER.response(200, now=NOW) is None
    seconds = DEFAULT_CLASSIFIER.response(429, headers={"Retry-After": "12"}, now=NOW)
    assert seconds.retry_after == timedelta(seconds=12)
    dated = DEFAULT_CLASSIFIER.exception(
        status_error(503, headers={"retry-after": "Sun, 22 Nov 2026 12:02:00 GMT"}), now=NOW)
    assert dated.retry_after == timedelta(minutes=2) and dated.upstream_status == 503


def test_real_calls_to_a_closed_port_and_a_slow_server_classify_as_transient() -> None:
    # A port held, but not listened on: a genuine connection refused from
    # httpx (held for the call, so no other test can start listening there).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        with pytest.raises(httpx.ConnectError) as refused:
            httpx.get(f"http://127.0.0.1:{probe.getsockname()[1]}/", timeout=2)
    assert DEFAULT_CLASSIFIER.exception(refused.value, now=NOW).code == "NETWORK_ERROR"
    # A server that accepts and never answers: a genuine read timeout.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        with pytest.raises(httpx.ReadTimeout) as slow:
            httpx.get(f"http://127.0.0.1:{silent.getsockname()[1]}/", timeout=0.3)
    assert DEFAULT_CLASSIFIER.exception(slow.value, now=NOW).code == "NETWORK_TIMEOUT"


@pytest.mark.parametrize(
    "make",
    [
        lambda: ErrorCode("lower", True, "m"),
        lambda: ErrorCode("OK", True, "two\nlines"),
        lambda: Taxonomy([ErrorCode("A", True, "m"), ErrorCode("A", False, "m")]),
        lambda: Taxonomy([], aliases={"X": "MISSING"}),
        lambda: Classifier(statuses={200: "BUG"}),
        lambda: Classifier(kinds={Kind.TIMEOUT: "NETWORK_TIMEOUT"}),
        lambda: Classifier(unclassified="NOPE"),
    ],
)
def test_a_broken_taxonomy_or_classifier_is_refused(make) -> None:
    with pytest.raises(ConfigError):
        make()


def test_a_tasks_own_transient_and_permanent_go_through_the_taxonomy_aliases() -> None:
    from redrive.errors import Permanent, Transient

    transient = GATEWAY.exception(Transient("gateway down", code="GW_UNAVAILABLE",
                                            retry_after=timedelta(seconds=3)), now=NOW)
    assert (transient.code, transient.retryable, transient.retry_after) == ("GW_5XX", True, timedelta(seconds=3))
    permanent = GATEWAY.exception(Permanent("mapping v2 unknown", code="INVALID_MAPPING"), now=NOW)
    assert (permanent.code, permanent.retryable, permanent.message) == ("GW_4XX", False, "mapping v2 unknown")


@pytest.mark.parametrize(
    ("body", "said"),
    [('{"error": {"message": "This model\'s maximum context length is 8192 tokens", '
      '"type": "invalid_request_error", "code": "context_length_exceeded"}}', "context_length_exceeded"),
     ('{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}', "overloaded_error"),
     ('{"code": "quota_exceeded"}', "quota_exceeded"),
     ('{"error": {"code": "the prompt was: secret stuff"}}', None),  # free text, not an identifier
     ("<html>bad request</html>", None), ("{not json", None), ("[1, 2]", None), (None, None)],
)
def test_a_providers_error_code_says_why_but_never_its_free_text(body, said) -> None:
    failure = DEFAULT_CLASSIFIER.response(400, body=body, now=NOW)
    assert failure is not None and not failure.retryable
    assert failure.message == "upstream answered HTTP 400" + (f" ({said})" if said else "")
    assert "secret" not in failure.message and "8192" not in failure.message
