"""Who is calling: a bearer token mapped to a principal (an owner, an
operator or a read-only operator), or the host application's own ``auth``
callable.

Tokens come from ``REDRIVE_API_TOKENS`` (``token=operator:name``,
``token=viewer:name`` or ``token=owner:alice``, comma-separated) or the file named by
``REDRIVE_API_TOKENS_FILE`` (one such pair per line, ``#`` comments). A token
is compared in constant time against every configured one, and never
appears in a log, an error or a response.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from pathlib import Path

from starlette.requests import Request

from redrive.admin import Actor
from redrive.errors import ConfigError
from redrive.settings import Settings

Auth = Callable[[Request], Actor | None]


_ROLES = "operator:NAME, viewer:NAME (a read-only operator) or owner:NAME"


def _principal(spec: str) -> Actor:
    role, _, name = spec.partition(":")
    if not name:
        raise ConfigError(f"an API token maps to {_ROLES}")
    if role == "operator":
        return Actor.operator(name)
    if role == "viewer":
        return Actor.viewer(name)
    if role == "owner":
        return Actor.acting_for(name)
    raise ConfigError(f"an API token maps to {_ROLES}, not {role!r}")


def parse_tokens(lines: list[str]) -> dict[str, Actor]:
    tokens: dict[str, Actor] = {}
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        token, sep, spec = line.partition("=")
        if not sep or len(token.strip()) < 16:
            raise ConfigError(f"API token {number}: write the token (16 characters or more), '=', then {_ROLES}")
        tokens[token.strip()] = _principal(spec.strip())
    return tokens


def tokens_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Actor]:
    settings = Settings.load(environ)
    lines = settings.api_tokens.split(",")
    if path := settings.api_tokens_file:
        try:
            lines += Path(path).read_text().splitlines()
        except OSError as exc:
            raise ConfigError(f"cannot read REDRIVE_API_TOKENS_FILE: {exc.strerror}") from None
    return parse_tokens(lines)


class TokenAuth:
    """``Authorization: Bearer <token>`` → the token's principal, or None."""

    def __init__(self, tokens: Mapping[str, Actor]) -> None:
        self._tokens = [(token.encode(), actor) for token, actor in tokens.items()]
        self._digests = {digest(token): actor for token, actor in tokens.items()}

    def __call__(self, request: Request) -> Actor | None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given:
            return None
        return self.actor(given)

    def by_digest(self, given: str) -> Actor | None:
        """The principal of the token whose ``digest`` this is (a dashboard
        session's), or None: a token taken out of the configuration ends its
        sessions with it."""
        found = None
        for known, actor in self._digests.items():
            if hmac.compare_digest(known, given):
                found = actor
        return found

    def actor(self, given: str) -> Actor | None:
        """The principal of a token (from a header or the login form), or None."""
        found = None
        for token, actor in self._tokens:  # every one compared: the time says nothing
            if hmac.compare_digest(token, given.strip().encode()):
                found = actor
        return found


def digest(secret: str) -> str:
    """What the store keeps of a token or a session id: never the thing itself."""
    return hashlib.sha256(secret.strip().encode()).hexdigest()
