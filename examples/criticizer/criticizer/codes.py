"""The failure table of §8.1 as error codes and a classifier.

Every category gets a stable ``error_class`` (the dead letters' and the
escalation's identifier). HTTP statuses and exceptions are classified by
redrive's classifier with this table's codes; what a provider says in its
error body (``rate_limit_exceeded`` on a 400, ``policy_denied`` on a 403)
is read first by ``check``, because the status alone would misfile it.

Only the provider's error *code* is kept, never its message: some
providers quote the request (here, the prompt) back in it.
"""

from __future__ import annotations

from datetime import timedelta

import httpx

from redrive import Classifier, ErrorCode, Kind, Permanent, Taxonomy, Transient

CODES = (
    # retryable
    ErrorCode("NETWORK_TIMEOUT", True, "A call timed out (DNS or socket); it will be retried."),
    ErrorCode("NETWORK_ERROR", True, "A connection failed or was reset; it will be retried."),
    ErrorCode("UPSTREAM_UNAVAILABLE", True, "An upstream answered 502/503/504; it will be retried."),
    ErrorCode("RATE_LIMITED", True, "A provider is throttling us; it will be retried after it says."),
    ErrorCode("UPSTREAM_5XX", True, "A provider had an internal error; it will be retried."),
    ErrorCode("CONFLICT", True, "A concurrent write got in the way; it will be retried."),
    # not retryable: replay after remediation
    ErrorCode("SCHEMA_INVALID", False, "A payload is malformed or misses required fields."),
    ErrorCode("VALIDATION_FAILED", False, "A request was refused as invalid."),
    ErrorCode("CONTEXT_TOO_LONG", False, "The change is too long for the model."),
    ErrorCode("AUTH_DENIED", False, "A credential or permission is wrong or expired."),
    ErrorCode("NOT_FOUND", False, "An input or destination no longer exists."),
    ErrorCode("POLICY_REJECTED", False, "A moderation or policy rule rejected the request."),
)
TAXONOMY = Taxonomy(CODES)
CLASSIFIER = Classifier(
    taxonomy=TAXONOMY,
    kinds={Kind.TIMEOUT: "NETWORK_TIMEOUT", Kind.CONNECT: "NETWORK_ERROR", Kind.NETWORK: "NETWORK_ERROR",
           Kind.RATE_LIMITED: "RATE_LIMITED", Kind.SERVER_ERROR: "UPSTREAM_5XX", Kind.CONFLICT: "CONFLICT",
           Kind.BAD_REQUEST: "VALIDATION_FAILED", Kind.CONTEXT_TOO_LONG: "CONTEXT_TOO_LONG",
           Kind.AUTH: "AUTH_DENIED", Kind.NOT_FOUND: "NOT_FOUND",
           # The table files malformed payloads and schema mismatches under validation: not retried.
           Kind.RESPONSE_PARSE: "SCHEMA_INVALID", Kind.RESPONSE_SCHEMA: "SCHEMA_INVALID"},
    statuses={502: "UPSTREAM_UNAVAILABLE", 503: "UPSTREAM_UNAVAILABLE", 504: "UPSTREAM_UNAVAILABLE"},
    # A null dereference, an illegal state, a broken invariant, a bad deploy config: BUG, dead-lettered at once.
    unclassified="BUG",
)

# The providers' own error codes, read from their error bodies.
_BODY_CODES = {
    "rate_limit_exceeded": "RATE_LIMITED", "quota_window_exceeded": "RATE_LIMITED",
    "internal_error": "UPSTREAM_5XX", "version_conflict": "CONFLICT",
    "content_policy_violation": "POLICY_REJECTED", "policy_denied": "POLICY_REJECTED",
    "invalid_api_key": "AUTH_DENIED", "token_expired": "AUTH_DENIED", "channel_not_found": "NOT_FOUND",
    "context_length_exceeded": "CONTEXT_TOO_LONG",
}


def check(answer: httpx.Response, service: str) -> None:
    """Raise for a failed answer, by the provider's error code when it gives
    one of the table's, else by its status (redrive's classifier)."""
    if answer.is_success:
        return
    try:
        error = answer.json().get("error")
        provider_code = error.get("code") if isinstance(error, dict) else None
    except (ValueError, AttributeError):
        provider_code = None
    code = _BODY_CODES.get(provider_code or "")
    if code is None:
        answer.raise_for_status()
        return
    what = f"{service} answered HTTP {answer.status_code} ({provider_code})"
    if TAXONOMY.require(code).retryable:
        wait = answer.headers.get("Retry-After", "")
        raise Transient(what, code=code, retry_after=timedelta(seconds=int(wait)) if wait.isdigit() else None)
    raise Permanent(what, code=code)
