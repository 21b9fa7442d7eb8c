"""Redaction: runs before anything is stored, logged or shown.

Two nets. Keys whose names say "secret" (password, token, api_key,
authorization, cookie, ...) have their values replaced whatever they hold.
Values anywhere are scanned for shapes that are secrets or PII on sight:
PEM blocks (even cut short), bearer tokens, JWTs, ``password=...`` and
``api_key: ...`` in free text, secrets in URL query strings, credentials in
URLs, provider keys (AWS, GitHub, GitLab, Stripe, Slack, OpenAI and
Anthropic, Google, SendGrid, Twilio, Mailgun, npm), card numbers
(Luhn-checked, so order ids survive), IBANs (checksum-checked), email
addresses. The provider shapes follow the rule sets of gitleaks and
detect-secrets. Redact a whole text before cutting it: a secret cut in half
is no longer recognisable.
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


def _iban(match: re.Match[str]) -> str:
    text = match.group(0).replace(" ", "")
    rearranged = text[4:] + text[:4]
    digits = "".join(str(int(char, 36)) for char in rearranged)
    return "[IBAN]" if 15 <= len(text) <= 34 and int(digits) % 97 == 1 else match.group(0)


# (pattern, replacement) in order: whole blocks before the tokens inside them.
_PATTERNS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S), "[PEM]"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*", re.S), "[PEM]"),  # cut short: all the rest
    (re.compile(r"-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----", re.S), "[PEM]"),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]+=*"), "Bearer " + REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"), "[JWT]"),
    (re.compile(r"(?i)\b((?:proxy-)?authorization[\"']?\s*[=:]\s*(?:(?:basic|digest|bearer|token)\s+)?)[^\s,;\"']+"),
     lambda m: m.group(1) + REDACTED),
    # key=value and key: value in free text, and secrets in a URL's query string
    (re.compile(r"(?i)(\b(?:pass(?:word|wd|phrase)?|secret|client[-_]?secret|token|access[-_]?token|"
                r"refresh[-_]?token|api[-_]?key|apikey|access[-_]?key|private[-_]?key|auth)\b|"
                r"[?&](?:sig|signature|key|x-amz-signature|x-goog-signature|code))"
                r"([\"']?\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s&#,;\"']+)"),
     lambda m: m.group(1) + m.group(2) + REDACTED),
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), "[AWS_KEY]"),
    (re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b"), "[GITHUB_TOKEN]"),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), "[GITLAB_TOKEN]"),
    (re.compile(r"\b[sr]k_(live|test)_[A-Za-z0-9]{10,}\b"), "[STRIPE_KEY]"),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), "[SLACK_TOKEN]"),
    (re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/]+"), "[SLACK_WEBHOOK]"),
    (re.compile(r"\bsk-(?:proj-|ant-|svcacct-)?[A-Za-z0-9_-]{20,}"), "[API_KEY]"),  # OpenAI, Anthropic
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), "[GOOGLE_KEY]"),
    (re.compile(r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"), "[SENDGRID_KEY]"),
    (re.compile(r"\bSK[0-9a-fA-F]{32}\b"), "[TWILIO_KEY]"),
    (re.compile(r"\bkey-[0-9a-f]{32}\b"), "[MAILGUN_KEY]"),
    (re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), "[NPM_TOKEN]"),
    (re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@"), lambda m: m.group(0).split("://")[0] + "://[CREDENTIALS]@"),
    (re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"), "[EMAIL]"),
    (re.compile(r"\b\d(?:[ -]?\d){12,18}\b"), _card),
    (re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b"), _iban),
)


def redact_text(text: str) -> str:
    """``text`` with every secret shape replaced. A secret percent-encoded
    (a URL's query as an HTTP client sends it: ``user%40example.org``,
    ``password%3Dhunter2``) is found in the decoded text, and then the
    decoded text is what comes back, redacted."""
    redacted = _redact(text)
    if "%" in text:
        decoded = _PERCENT.sub(_decode, text)
        if decoded != text:
            clean = _redact(decoded)
            if clean != decoded:  # decoding showed a secret: the encoded text hides it from the patterns
                return clean
    return redacted


def _redact(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


_PERCENT = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


def _decode(match: re.Match[str]) -> str:
    return bytes.fromhex(match.group(0).replace("%", "")).decode("utf-8", "replace")


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
