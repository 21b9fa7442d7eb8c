"""One set of error codes everywhere (API, job records, logs, the queue
page), each with its one-line message, and the internal codes shown as
public ones. The design's ten and no more: an answer with a nuance of its
own (no such job, a retry of a job that has not failed) is one of the ten
with a message that says the nuance (web.py, and the README's table)."""

from __future__ import annotations

from redrive import Classifier, ErrorCode, Kind, Taxonomy

CODES = (
    ErrorCode("NOT_PDF", False, "Only PDF files are supported."),
    ErrorCode("TOO_LARGE", False, "File exceeds 50 MB limit."),
    ErrorCode("GW_4XX", False, "Couldn’t convert this file with the selected mapping."),
    ErrorCode("GW_5XX", True, "Converter service is having an issue. We’ll retry shortly."),
    ErrorCode("GW_TIMEOUT", True, "Conversion is taking too long. We’ll retry."),
    ErrorCode("IO_ERROR", True, "Temporary storage issue. We’ll retry."),
    ErrorCode("NOT_READY", False, "Conversion not finished yet."),
    ErrorCode("EXPIRED", False, "File was removed by retention. Re-upload to regenerate."),
    ErrorCode("FORBIDDEN", False, "This file isn’t yours."),
    # Not retried: an error nobody classified is a bug or the input's doing,
    # and retrying either only repeats it.
    ErrorCode("UNKNOWN", False, "Something went wrong converting this file."),
)
TAXONOMY = Taxonomy(CODES, aliases={
    "GW_UNAVAILABLE": "GW_5XX", "INVALID_MAPPING": "GW_4XX", "PARSE_ERROR": "GW_4XX",
    "VALIDATION_ERROR": "GW_4XX", "MEMORY_ERROR": "UNKNOWN",
})
NAMES = frozenset(code.name for code in CODES)
CLASSIFIER = Classifier(
    taxonomy=TAXONOMY,
    kinds={Kind.TIMEOUT: "GW_TIMEOUT", Kind.CONNECT: "GW_5XX", Kind.NETWORK: "GW_5XX",
           Kind.RATE_LIMITED: "GW_5XX", Kind.SERVER_ERROR: "GW_5XX", Kind.CONFLICT: "GW_5XX",
           Kind.BAD_REQUEST: "GW_4XX", Kind.CONTEXT_TOO_LONG: "GW_4XX", Kind.AUTH: "GW_5XX",
           Kind.NOT_FOUND: "GW_5XX", Kind.RESPONSE_PARSE: "GW_5XX", Kind.RESPONSE_SCHEMA: "GW_5XX"},
    statuses={400: "GW_4XX", 406: "GW_4XX", 413: "GW_4XX", 415: "GW_4XX"},
    unclassified="UNKNOWN",
)


def public(code: str | None) -> str | None:
    """The code users see: the converter's own, an internal one as its public
    code, and anything else (the engine's LEASE_EXPIRED, say) as UNKNOWN."""
    if code is None:
        return None
    found = TAXONOMY.public(code)
    return found.name if found is not None and found.name in NAMES else "UNKNOWN"


def message(code: str | None) -> str | None:
    """The one-line message users see for ``code``."""
    shown = public(code)
    return None if shown is None else TAXONOMY.require(shown).message
