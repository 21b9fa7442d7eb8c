"""Redaction: runs before anything is stored, logged or shown.

Two nets. Keys whose names say "secret" (password, token, api_key,
authorization, cookie, ...) have their values replaced whatever they hold.
Values anywhere are scanned for shapes that are secrets or PII on sight:
bearer tokens, JWTs, AWS access keys, GitHub and Stripe tokens, card numbers
(Luhn-checked, so order ids survive), email addresses, credentials in URLs,
PEM blocks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

REDACTED = "[REDACTED]"

_SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)?|secret|token|api[-_]?key|apikey|auth(orization)?|cookie|"
    r"session|credential|private[-_]?key|signature|client[-_]?secret|access[-_]?key",
    re.IGNORECASE,
)


def _luhn(digits: str) -> bool:
    total, double = 0, False
    for char in reversed(digits):
        n = int(char)
        if double:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
        double = not double
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    return "[CARD]" if 13 <= len(digits) <= 19 and _luhn(digits) else match.group(0)


# (pattern, replacement) in order: whole blocks before the tokens inside them.
_PATTERNS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S), "[PEM]"),
    (re.compile(r"-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----", re.S), "[PEM]"),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]+=*"), "Bearer " + REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"), "[JWT]"),
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), "[AWS_KEY]"),
    (re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b"), "[GITHUB_TOKEN]"),
    (re.compile(r"\b[sr]k_(live|test)_[A-Za-z0-9]{10,}\b"), "[STRIPE_KEY]"),
    (re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@"), lambda m: m.group(0).split("://")[0] + "://[CREDENTIALS]@"),
    (re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"), "[EMAIL]"),
    (re.compile(r"\b\d(?:[ -]?\d){12,18}\b"), _card),
)


def redact_text(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def redact(value: Any) -> Any:
    """A redacted copy of a JSON-like value; the original is left untouched."""
    if isinstance(value, dict):
        return {
            key: REDACTED if isinstance(key, str) and is_secret_key(key) and value[key] is not None
            else redact(value[key])
            for key in value
        }
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
