"""What every page and form of the dashboard goes through: a page for a
principal (the login form without one, an error page for a refusal), a
change from a form (from this site, with the session's CSRF token, back to
the page it came from with a line saying what was done), and an action on
everything a list's filter matches (a count to confirm first)."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from redrive.admin import Actor, Admin, Bulk
from redrive.app import App
from redrive.core.breaker import BreakerMode
from redrive.errors import ConfigError, RedriveError
from redrive.http.dashboard.render import SECURITY_HEADERS, Done, base_of, flash, render
from redrive.http.dashboard.session import csrf_for, same_site, who
from redrive.http.errors import status_of
from redrive.http.surface import caller_address, surface

BULK_MAX = 1000  # rows one form may act on: a page's worth, generously
Build = Callable[[Request, Admin], dict[str, Any]]


def page(request: Request, template: str, name: str, build: Build) -> Response:
    """A page for a principal: the login form without one, an error page for a refusal."""
    on = surface(request)
    try:
        actor = who(request)
    except RedriveError as exc:  # the store keeps the sessions: down, it cannot say who
        return refused(request, status_of(exc), exc.message)
    on.throttle.check(actor.name if actor else caller_address(request))
    if actor is None:
        return RedirectResponse(f"{base_of(request)}/login", status_code=303, headers=SECURITY_HEADERS)
    common: dict[str, Any] = {"who": actor, "csrf": csrf_for(request, actor), "page": name,
                              "held": held(on.app), "flash": flash(request.query_params),
                              "here": _here(request), "may_act": not actor.read_only}
    try:
        return render(request, template, **common, **build(request, on.app.admin(actor)))
    except RedriveError as exc:
        return refused(request, status_of(exc), exc.message, actor)


def refused(request: Request, status: int, message: str, actor: Actor | None = None) -> HTMLResponse:
    return render(request, "error.html", http_status=status, title=str(status), message=message, who=actor,
                  held=held(surface(request).app) if actor else [], csrf=csrf_for(request, actor) if actor else "")


def checked(request: Request, csrf: str) -> Actor | Response:
    """Who sends a form that changes something, or the page refusing it:
    it must come from this site, with the session's CSRF token."""
    try:
        actor = who(request)
    except RedriveError as exc:
        return refused(request, status_of(exc), exc.message)
    if actor is None:
        return refused(request, 401, "log in first")
    surface(request).throttle.check(actor.name)
    if not same_site(request) or not hmac.compare_digest(csrf, csrf_for(request, actor)):
        return refused(request, 403, "this form did not come from this dashboard", actor)
    if actor.read_only:  # Admin refuses each change too; a form may act on many
        return refused(request, 403, "a read-only operator may not change anything", actor)
    return actor


def action(request: Request, csrf: str, act: Callable[[Admin], Done], back: str) -> Response:
    """A change from a form: from this site, with the session's CSRF token.
    The page it comes back to says what was done (``render.flash``): the
    link carries a code and counts, never text to show."""
    actor = checked(request, csrf)
    if isinstance(actor, Response):
        return actor
    try:
        code, counts = act(surface(request).app.admin(actor))
    except RedriveError as exc:
        return refused(request, status_of(exc), exc.message, actor)
    joiner = "&" if "?" in back else "?"
    return RedirectResponse(f"{base_of(request)}{back}{joiner}{urlencode({'done': code, **counts})}",
                            status_code=303, headers=SECURITY_HEADERS)


def matching(request: Request, csrf: str, confirmed: bool, run: Callable[[Admin, bool], Bulk], *, act: str,
             where: dict[str, str], page: str, noun: str, done_code: str,
             extra: dict[str, str] | None = None) -> Response:
    """An action on everything a list's filter matches: a page with the
    count (``run`` dry) to confirm first, then ``run`` for real."""
    back = f"/{page}?" + urlencode({k: v for k, v in where.items() if v})
    if confirmed:
        def apply(admin: Admin) -> Done:
            done = run(admin, False)
            return done_code, {"n": done.done, "skipped": done.skipped}

        return action(request, csrf, apply, back)
    actor = checked(request, csrf)
    if isinstance(actor, Response):
        return actor
    app = surface(request).app
    try:
        counted = run(app.admin(actor), True)
    except RedriveError as exc:
        return refused(request, status_of(exc), exc.message, actor)
    return render(request, "confirm.html", who=actor, csrf=csrf, held=held(app), page=page, title="Confirm",
                  may_act=True, count=counted.matched, act=act, where=where, back=back,
                  target=f"/{page}/matching", noun=noun, extra=extra)


def held(app: App) -> list[str]:
    """Hold-mode dependencies whose breaker is open now: every page says so."""
    try:
        breakers = app.admin(Actor.operator("dashboard")).breakers()
    except RedriveError:
        return []
    declared = app.registry.dependencies
    return [name for name, status in breakers.items()
            if status.state == "open" and (name not in declared or declared[name].mode is BreakerMode.HOLD)]


def when(text: str | None, name: str) -> datetime | None:
    """A time from a form's datetime-local field (or ISO 8601), read as UTC when it names no zone."""
    if not text:
        return None
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{name} is not a time: {text[:40]!r} (use YYYY-MM-DDTHH:MM)") from None
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def hours(text: str | None, name: str) -> timedelta | None:
    if not text:
        return None
    try:
        found = float(text)
    except ValueError:
        raise ConfigError(f"{name} is a number of hours, not {text[:40]!r}") from None
    if not 0 <= found <= 24 * 366 * 10:
        raise ConfigError(f"{name} is 0 to 87840 hours, not {text[:40]!r}")
    return timedelta(hours=found)


def number(text: str | None, default: int) -> int:
    return int(text) if text and text.isdigit() else default


def back_to(path: str, default: str) -> str:
    """Where a form returns to: a page of this dashboard, never another site."""
    if path.startswith("/") and not path.startswith("//") and "\\" not in path:
        return path
    return default


def _here(request: Request) -> str:
    """This page's path and query below the dashboard's prefix, without the
    last action's message: where a form on it comes back to."""
    base = base_of(request)
    path = request.url.path
    if base and path.startswith(base):
        path = path[len(base):] or "/"
    query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "done"])
    return path + ("?" + query if query else "")
