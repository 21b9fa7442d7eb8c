"""Who is looking at the dashboard, and the proof that a form came from it.

Who: the host app's ``auth`` callable, or a token, from the API's
``Authorization`` header or from the session cookie the login form sets
(HttpOnly, SameSite=Strict). The cookie holds a session id of its own, not
the token: the store keeps a digest of each, so a logout (or the token's
removal) ends it. Every form that changes something carries a CSRF token
(an HMAC of the session under the server's secret) and must come from this
site (its ``Origin``, else its ``Referer``)."""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta
from urllib.parse import urlsplit

from fastapi import Request

from redrive.admin import Actor
from redrive.http.auth import digest
from redrive.http.surface import surface

COOKIE = "redrive_session"
SESSION_TTL = timedelta(hours=12)  # a working day's session: then the login form again


def who(request: Request) -> Actor | None:
    on = surface(request)
    found = on.auth(request)
    if found is None and on.tokens is not None and (cookie := request.cookies.get(COOKIE)):
        principal = on.app.store.session_read(id=digest(cookie))
        found = on.tokens.by_digest(principal) if principal is not None else None
    return found


def csrf_for(request: Request, actor: Actor) -> str:
    session = request.cookies.get(COOKIE) or actor.name
    return hmac.new(surface(request).secret, session.encode(), hashlib.sha256).hexdigest()


def same_site(request: Request) -> bool:
    """A change must come from a page of this site: its Origin (or, without
    one, its Referer) names this host."""
    source = request.headers.get("origin") or request.headers.get("referer")
    return bool(source) and urlsplit(source).netloc == request.headers.get("host")
