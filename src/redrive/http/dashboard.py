"""The dashboard: server-rendered pages (Jinja2, autoescaped) over the same
``Admin`` and views as the API, with htmx (vendored in ``static/``) to
refresh counts and the breaker banner without a reload.

Who: the host app's ``auth`` callable, or a token, from the API's
``Authorization`` header or from the session cookie the login form sets
(HttpOnly, SameSite=Strict). Every form that changes something carries a
CSRF token (an HMAC of the session under the server's secret) and must come
from this site (its ``Origin``, else its ``Referer``); every page forbids
inline script and framing (``SECURITY_HEADERS``). docs/dashboard.md.
"""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader

from redrive.admin import Actor, Admin
from redrive.app import App
from redrive.core.breaker import BreakerMode
from redrive.core.states import Status
from redrive.errors import ConfigError, Forbidden, RedriveError
from redrive.http.auth import Auth, TokenAuth
from redrive.http.errors import status_of
from redrive.http.throttle import Throttle
from redrive.store.reads import page_size
from redrive.views import event_view, job_view, queue_view, worker_view

COOKIE = "redrive_session"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
_TEMPLATES = Environment(loader=PackageLoader("redrive.http", "templates"), autoescape=True)


def pages(app: App, auth: Auth, throttle: Throttle) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    # CSRF tokens are HMACs under this secret: set REDRIVE_DASHBOARD_SECRET
    # when several server processes share the users (else each has its own).
    secret = os.environ.get("REDRIVE_DASHBOARD_SECRET", "").encode() or secrets.token_bytes(32)
    tokens = auth if isinstance(auth, TokenAuth) else None

    def who(request: Request) -> Actor | None:
        found = auth(request)
        if found is None and tokens is not None and (cookie := request.cookies.get(COOKIE)):
            found = tokens.actor(cookie)
        return found

    def csrf_for(request: Request, actor: Actor) -> str:
        session = request.cookies.get(COOKIE) or actor.name
        return hmac.new(secret, session.encode(), hashlib.sha256).hexdigest()

    def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("base", request.scope.get("root_path", ""))
        html = _TEMPLATES.get_template(template).render(request=request, **context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def refused(request: Request, status: int, message: str, actor: Actor | None = None) -> HTMLResponse:
        return render(request, "error.html", status=status, title=str(status), message=message, who=actor,
                      held=_held(app) if actor else [], csrf=csrf_for(request, actor) if actor else "")

    def page(template: str, name: str, build: Callable[[Request, Admin], dict[str, Any]]) -> Callable[..., Response]:
        """A page for a principal: the login form without one, an error page for a refusal."""

        def handler(request: Request) -> Response:
            actor = who(request)
            throttle.check(actor.name if actor else f"anonymous@{request.client.host if request.client else '?'}")
            if actor is None:
                base = request.scope.get("root_path", "")
                return RedirectResponse(f"{base}/login", status_code=303, headers=SECURITY_HEADERS)
            admin = app.admin(actor)
            common: dict[str, Any] = {"who": actor, "csrf": csrf_for(request, actor), "page": name,
                                      "held": _held(app), "flash": request.query_params.get("done")}
            try:
                return render(request, template, **common, **build(request, admin))
            except RedriveError as exc:
                return refused(request, status_of(exc), exc.message, actor)

        return handler

    def action(request: Request, csrf: str, act: Callable[[Admin], str], back: str) -> Response:
        """A change from a form: from this site, with the session's CSRF token."""
        actor = who(request)
        if actor is None:
            return refused(request, 401, "log in first")
        throttle.check(actor.name)
        if not _same_site(request) or not hmac.compare_digest(csrf, csrf_for(request, actor)):
            return refused(request, 403, "this form did not come from this dashboard", actor)
        try:
            done = act(app.admin(actor))
        except RedriveError as exc:
            return refused(request, status_of(exc), exc.message, actor)
        base = request.scope.get("root_path", "")
        return RedirectResponse(f"{base}{back}?{urlencode({'done': done})}", status_code=303,
                                headers=SECURITY_HEADERS)

    # -- login ---------------------------------------------------------------------

    @router.get("/login")
    def login_form(request: Request) -> Response:
        return render(request, "login.html")

    @router.post("/login")
    def login(request: Request, token: str = Form("")) -> Response:
        throttle.check(f"anonymous@{request.client.host if request.client else '?'}")
        base = request.scope.get("root_path", "")
        if tokens is None or not _same_site(request) or tokens.actor(token) is None:
            return render(request, "login.html", status=401, error="That token is not valid here.")
        response = RedirectResponse(f"{base}/", status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https",
                            path=base or "/")
        return response

    @router.post("/logout")
    def logout(request: Request, csrf: str = Form("")) -> Response:
        base = request.scope.get("root_path", "")
        actor = who(request)
        if actor is None or not _same_site(request) or not hmac.compare_digest(csrf, csrf_for(request, actor)):
            return refused(request, 403, "this form did not come from this dashboard")
        response = RedirectResponse(f"{base}/login", status_code=303, headers=SECURITY_HEADERS)
        response.delete_cookie(COOKIE, path=base or "/")
        return response

    # -- pages -----------------------------------------------------------------------

    def overview(request: Request, admin: Admin) -> dict[str, Any]:
        return {"title": "Overview", **_counts(admin)}

    def jobs(request: Request, admin: Admin) -> dict[str, Any]:
        q = request.query_params
        where = {k: q.get(k) or None for k in ("status", "task", "queue", "error_code", "owner", "q")}
        status = where["status"]
        if status is not None and status not in {s.value for s in Status}:
            raise ConfigError(f"no state named {status!r}")
        search = where["q"]
        found = admin.jobs(status=Status(status) if status else None, task=where["task"], queue=where["queue"],
                           error_code=where["error_code"], owner=where["owner"], idempotency_key=search,
                           after=q.get("cursor"), limit=page_size(_number(q.get("limit"), 50)))
        params = {k: v for k, v in where.items() if v}
        return {"title": "Jobs", "jobs": [job_view(j) for j in found], "where": where,
                "statuses": [s.value for s in Status], "next_cursor": found.next_cursor,
                "next_url": "?" + urlencode({**params, "cursor": found.next_cursor or ""})}

    def job(request: Request, admin: Admin) -> dict[str, Any]:
        found = admin.job(request.path_params["job_id"])
        shown = job_view(found)
        return {"title": f"Job {found.id}", "job": shown,
                "args": json.dumps({"args": shown["args"], "kwargs": shown["kwargs"]}, indent=2),
                "result": json.dumps(shown["result"], indent=2),
                "events": [event_view(e) for e in admin.job_events(found.id)]}

    router.add_api_route("/", page("overview.html", "overview", overview), methods=["GET"])
    router.add_api_route("/jobs", _redirecting(page("jobs.html", "jobs", jobs)), methods=["GET"])
    router.add_api_route("/jobs/{job_id}", page("job.html", "jobs", job), methods=["GET"])

    @router.post("/jobs/{job_id}/retry")
    def retry(request: Request, job_id: str, csrf: str = Form("")) -> Response:
        return action(request, csrf, lambda a: (a.retry(job_id), "Retried: the job is queued again.")[1],
                      f"/jobs/{job_id}")

    @router.post("/jobs/{job_id}/cancel")
    def cancel(request: Request, job_id: str, csrf: str = Form("")) -> Response:
        return action(request, csrf, lambda a: (a.cancel(job_id), "Cancel asked.")[1], f"/jobs/{job_id}")

    # -- fragments that refresh by themselves ----------------------------------------

    @router.get("/_banner")
    def banner(request: Request) -> Response:
        if who(request) is None:
            return Response(status_code=204)
        return render(request, "banner.html", held=_held(app))

    @router.get("/_counts")
    def counts(request: Request) -> Response:
        actor = who(request)
        if actor is None:
            return Response(status_code=204)
        try:
            return render(request, "counts.html", **_counts(app.admin(actor)))
        except Forbidden:
            return Response(status_code=403)

    return router


def _counts(admin: Admin) -> dict[str, Any]:
    if not admin.actor.is_operator:
        return {"queues": [], "workers": []}
    found, now = admin.workers()
    return {"queues": [queue_view(q) for q in admin.queues()], "workers": [worker_view(w, now) for w in found]}


def _held(app: App) -> list[str]:
    """Hold-mode dependencies whose breaker is open now: every page says so."""
    try:
        breakers = app.admin(Actor.operator("dashboard")).breakers()
    except RedriveError:
        return []
    declared = app.registry.dependencies
    return [name for name, status in breakers.items()
            if status.state == "open" and (name not in declared or declared[name].mode is BreakerMode.HOLD)]


def _same_site(request: Request) -> bool:
    """A change must come from a page of this site: its Origin (or, without
    one, its Referer) names this host."""
    source = request.headers.get("origin") or request.headers.get("referer")
    return bool(source) and urlsplit(source).netloc == request.headers.get("host")


def _number(text: str | None, default: int) -> int:
    return int(text) if text and text.isdigit() else default


def _looks_like_id(text: str) -> bool:
    return len(text) == 36 and text.count("-") == 4


def _redirecting(handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
    """A search for a job id goes straight to the job."""

    def wrapped(request: Request) -> Response:
        search = request.query_params.get("q", "")
        if search and _looks_like_id(search):
            base = request.scope.get("root_path", "")
            return RedirectResponse(f"{base}/jobs/{search}", status_code=303, headers=SECURITY_HEADERS)
        return handler(request)

    return wrapped
