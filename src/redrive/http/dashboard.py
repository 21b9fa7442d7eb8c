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
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader
from markupsafe import Markup

from redrive.admin import BULK_ACTIONS, Actor, Admin, Bulk
from redrive.app import App
from redrive.core.breaker import BreakerMode
from redrive.core.job import LETTER_STATES
from redrive.core.outbox import OutboxStatus
from redrive.core.rollups import KEEP, WINDOWS
from redrive.core.states import Status
from redrive.errors import ConfigError, Forbidden, RedriveError
from redrive.http.auth import Auth, TokenAuth, digest
from redrive.http.charts import BARS_H, LINES_H, drawn
from redrive.http.errors import status_of
from redrive.http.throttle import Throttle
from redrive.settings import Settings
from redrive.store.reads import EXACT_UP_TO, LOWER_BOUND_AT, MinuteCount, page_size
from redrive.views import (
    breaker_event_view,
    breaker_view,
    dead_letter_view,
    event_view,
    facets_view,
    job_view,
    outbox_view,
    queue_view,
    schedule_view,
    workers_view,
)

COOKIE = "redrive_session"
SESSION_TTL = timedelta(hours=12)  # a working day's session: then the login form again
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
_TEMPLATES = Environment(loader=PackageLoader("redrive.http", "templates"), autoescape=True)


def _when_shown(value: str | datetime | None) -> str:
    """A time as people read it: to the second, in UTC, with the zone said."""
    if not value:
        return "–"
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration_shown(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    return f"{minutes // 60} h {minutes % 60} min"


def _ago_shown(value: str | datetime | None) -> Markup:
    """A time relative to now ("3 min ago", "in 2 h"), the exact UTC time on hover."""
    if not value:
        return Markup("–")
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    seconds = (datetime.now(UTC) - at).total_seconds()
    span = abs(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if span >= size:
            amount = f"{int(span // size)} {unit}"
            break
    else:
        amount = f"{int(span)} s"
    said = "just now" if span < 1 else (f"{amount} ago" if seconds >= 0 else f"in {amount}")
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        at.astimezone(UTC).isoformat(), _when_shown(at), said)


_TEMPLATES.filters |= {"when": _when_shown, "ago": _ago_shown, "duration": _duration_shown}


def pages(app: App, auth: Auth, throttle: Throttle) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    # CSRF tokens are HMACs under this secret: set REDRIVE_DASHBOARD_SECRET
    # when several server processes share the users (else each has its own).
    secret = Settings.load().dashboard_secret.encode() or secrets.token_bytes(32)
    tokens = auth if isinstance(auth, TokenAuth) else None

    def who(request: Request) -> Actor | None:
        found = auth(request)
        if found is None and tokens is not None and (cookie := request.cookies.get(COOKIE)):
            principal = app.store.session_read(id=digest(cookie))
            found = tokens.by_digest(principal) if principal is not None else None
        return found

    def csrf_for(request: Request, actor: Actor) -> str:
        session = request.cookies.get(COOKIE) or actor.name
        return hmac.new(secret, session.encode(), hashlib.sha256).hexdigest()

    def render(request: Request, template: str, http_status: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("base", request.scope.get("root_path", ""))
        html = _TEMPLATES.get_template(template).render(request=request, **context)
        return HTMLResponse(html, status_code=http_status, headers=SECURITY_HEADERS)

    def refused(request: Request, status: int, message: str, actor: Actor | None = None) -> HTMLResponse:
        return render(request, "error.html", http_status=status, title=str(status), message=message, who=actor,
                      held=_held(app) if actor else [], csrf=csrf_for(request, actor) if actor else "")

    def page(template: str, name: str, build: Callable[[Request, Admin], dict[str, Any]]) -> Callable[..., Response]:
        """A page for a principal: the login form without one, an error page for a refusal."""

        def handler(request: Request) -> Response:
            try:
                actor = who(request)
            except RedriveError as exc:  # the store keeps the sessions: down, it cannot say who
                return refused(request, status_of(exc), exc.message)
            throttle.check(actor.name if actor else f"anonymous@{request.client.host if request.client else '?'}")
            if actor is None:
                base = request.scope.get("root_path", "")
                return RedirectResponse(f"{base}/login", status_code=303, headers=SECURITY_HEADERS)
            admin = app.admin(actor)
            common: dict[str, Any] = {"who": actor, "csrf": csrf_for(request, actor), "page": name,
                                      "held": _held(app), "flash": _flash(request.query_params),
                                      "here": _here(request), "may_act": not actor.read_only}
            try:
                return render(request, template, **common, **build(request, admin))
            except RedriveError as exc:
                return refused(request, status_of(exc), exc.message, actor)

        return handler

    def checked(request: Request, csrf: str) -> Actor | Response:
        """Who sends a form that changes something, or the page refusing it:
        it must come from this site, with the session's CSRF token."""
        try:
            actor = who(request)
        except RedriveError as exc:
            return refused(request, status_of(exc), exc.message)
        if actor is None:
            return refused(request, 401, "log in first")
        throttle.check(actor.name)
        if not _same_site(request) or not hmac.compare_digest(csrf, csrf_for(request, actor)):
            return refused(request, 403, "this form did not come from this dashboard", actor)
        if actor.read_only:  # Admin refuses each change too; a form may act on many
            return refused(request, 403, "a read-only operator may not change anything", actor)
        return actor

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
        try:
            counted = run(app.admin(actor), True)
        except RedriveError as exc:
            return refused(request, status_of(exc), exc.message, actor)
        return render(request, "confirm.html", who=actor, csrf=csrf, held=_held(app), page=page, title="Confirm",
                      may_act=True, count=counted.matched, act=act, where=where, back=back,
                      target=f"/{page}/matching", noun=noun, extra=extra)

    def action(request: Request, csrf: str, act: Callable[[Admin], Done], back: str) -> Response:
        """A change from a form: from this site, with the session's CSRF token.
        The page it comes back to says what was done from ``_DONE``: the link
        carries a code and counts, never text to show."""
        actor = checked(request, csrf)
        if isinstance(actor, Response):
            return actor
        try:
            code, counts = act(app.admin(actor))
        except RedriveError as exc:
            return refused(request, status_of(exc), exc.message, actor)
        base = request.scope.get("root_path", "")
        joiner = "&" if "?" in back else "?"
        return RedirectResponse(f"{base}{back}{joiner}{urlencode({'done': code, **counts})}", status_code=303,
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
            return render(request, "login.html", http_status=401, error="That token is not valid here.")
        # The cookie holds a session id of its own, not the token: the store
        # keeps a digest of each, so a logout (or the token's removal) ends it.
        session = secrets.token_urlsafe(32)
        app.store.session_open(id=digest(session), principal=digest(token), ttl=SESSION_TTL)
        response = RedirectResponse(f"{base}/", status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(COOKIE, session, httponly=True, samesite="strict", secure=request.url.scheme == "https",
                            path=base or "/", max_age=int(SESSION_TTL.total_seconds()))
        return response

    @router.post("/logout")
    def logout(request: Request, csrf: str = Form("")) -> Response:
        base = request.scope.get("root_path", "")
        actor = who(request)
        if actor is None or not _same_site(request) or not hmac.compare_digest(csrf, csrf_for(request, actor)):
            return refused(request, 403, "this form did not come from this dashboard")
        if cookie := request.cookies.get(COOKIE):
            app.store.session_close(id=digest(cookie))
        response = RedirectResponse(f"{base}/login", status_code=303, headers=SECURITY_HEADERS)
        response.delete_cookie(COOKIE, path=base or "/")
        return response

    # -- pages -----------------------------------------------------------------------

    def overview(request: Request, admin: Admin) -> dict[str, Any]:
        return {"title": "Overview", **_counts(admin)}

    def jobs(request: Request, admin: Admin) -> dict[str, Any]:
        q = request.query_params
        where = {k: q.get(k) or None for k in ("status", "task", "queue", "error_code", "owner", "q", "since",
                                                "until")}
        status = where["status"]
        if status is not None and status not in {s.value for s in Status}:
            raise ConfigError(f"no state named {status!r}")
        search = where["q"]
        found = admin.jobs(status=Status(status) if status else None, task=where["task"], queue=where["queue"],
                           error_code=where["error_code"], owner=where["owner"], idempotency_key=search,
                           created_after=_when(where["since"], "since"), created_before=_when(where["until"], "until"),
                           after=q.get("cursor"), limit=page_size(_number(q.get("limit"), 50)))
        params = {k: v for k, v in where.items() if v}
        return {"title": "Jobs", "jobs": [job_view(j) for j in found], "where": where,
                "statuses": [s.value for s in Status], "next_cursor": found.next_cursor,
                "next_url": "?" + urlencode({**params, "cursor": found.next_cursor or ""})}

    def job(request: Request, admin: Admin) -> dict[str, Any]:
        found = admin.job(request.path_params["job_id"])
        shown = job_view(found)
        # An operator sees the job's latest dead letter, linked, and its last stack (redacted)
        letters = (admin.dead_letters(job_id=found.id, limit=1).items
                   if admin.actor.is_operator and found.status is Status.FAILED else [])
        return {"title": f"Job {found.id}", "job": shown,
                "letter": dead_letter_view(letters[0]) if letters else None,
                "args": json.dumps({"args": shown["args"], "kwargs": shown["kwargs"]}, indent=2),
                "result": json.dumps(shown["result"], indent=2),
                "events": [event_view(e) for e in admin.job_events(found.id)]}

    router.add_api_route("/", page("overview.html", "overview", overview), methods=["GET"])
    router.add_api_route("/jobs", _redirecting(page("jobs.html", "jobs", jobs)), methods=["GET"])
    router.add_api_route("/jobs/{job_id}", page("job.html", "jobs", job), methods=["GET"])

    @router.post("/jobs/{job_id}/retry")
    def retry(request: Request, job_id: str, csrf: str = Form("")) -> Response:
        return action(request, csrf, lambda a: (a.retry(job_id), ("retried", {}))[1],
                      f"/jobs/{job_id}")

    @router.post("/jobs/{job_id}/cancel")
    def cancel(request: Request, job_id: str, csrf: str = Form("")) -> Response:
        return action(request, csrf, lambda a: (a.cancel(job_id), ("cancel_asked", {}))[1], f"/jobs/{job_id}")

    @router.post("/jobs/{job_id}/delete")
    def delete(request: Request, job_id: str, csrf: str = Form("")) -> Response:
        def apply(admin: Admin) -> Done:
            admin.delete(job_id)
            return "deleted", {}

        return action(request, csrf, apply, "/jobs")

    @router.post("/jobs/bulk")
    def bulk(request: Request, csrf: str = Form(""), act: str = Form(""), ids: list[str] = Form([]),
             back: str = Form("")) -> Response:
        def apply(admin: Admin) -> Done:
            if act not in ("retry", "cancel"):
                raise ConfigError("choose retry or cancel")
            if not ids:
                raise ConfigError("select at least one job")
            done = 0
            for job_id in ids[:_BULK_MAX]:
                try:
                    (admin.retry if act == "retry" else admin.cancel)(job_id)
                    done += 1
                except RedriveError:  # not failed, ended, gone or another's: counted as not done
                    pass
            return f"{act}_selected", {"n": done, "of": len(ids[:_BULK_MAX])}

        return action(request, csrf, apply, _back(back, "/jobs"))

    @router.post("/jobs/matching")
    def jobs_matching(request: Request, csrf: str = Form(""), act: str = Form(""), confirm: str = Form(""),
                      status: str = Form(""), task: str = Form(""), queue: str = Form(""),
                      error_code: str = Form(""), owner: str = Form(""), since: str = Form(""),
                      until: str = Form("")) -> Response:
        """Every job the list's filter matches: first a page with the count
        to confirm, then the action, in batches (``Admin.bulk``)."""
        where = {"status": status, "task": task, "queue": queue, "error_code": error_code, "owner": owner,
                 "since": since, "until": until}

        def bulk(admin: Admin, dry_run: bool) -> Bulk:
            if act not in BULK_ACTIONS:
                raise ConfigError("choose retry, cancel or delete")
            if status and status not in {s.value for s in Status}:
                raise ConfigError(f"no state named {status!r}")
            return admin.bulk(act, dry_run=dry_run, status=Status(status) if status else None, task=task or None,
                              queue=queue or None, error_code=error_code or None, owner=owner or None,
                              created_after=_when(since or None, "since"), created_before=_when(until or None, "until"))

        return matching(request, csrf, confirm == "yes", bulk, act=act, where=where, page="jobs", noun="job",
                        done_code=f"{act}_matching")

    def dead_letters(request: Request, admin: Admin) -> dict[str, Any]:
        q = request.query_params
        where: dict[str, Any] = {k: q.get(k) or None for k in ("error_class", "stage", "task", "owner", "state")}
        if where["state"] is not None and where["state"] not in LETTER_STATES:
            raise ConfigError(f"no dead-letter state named {where['state']!r}")
        ages: dict[str, Any] = {"older_than": _hours(q.get("older_than_h"), "older than"),
                                "newer_than": _hours(q.get("newer_than_h"), "newer than")}
        found = admin.dead_letters(**where, **ages, after=q.get("cursor"), limit=page_size(_number(q.get("limit"), 50)))
        facets = admin.dead_letter_facets(**where, **ages)
        params = {k: v for k, v in q.items() if v and k != "cursor"}
        return {"title": "Dead letters", "letters": [dead_letter_view(d) for d in found], "where": where,
                "ages": {k: q.get(f"{k}_h") or "" for k in ages}, "facets": facets_view(facets),
                "states": LETTER_STATES, "next_cursor": found.next_cursor,
                "facet_url": lambda key, value: "?" + urlencode({**params, key: value}),
                "next_url": "?" + urlencode({**params, "cursor": found.next_cursor or ""})}

    def dead_letter(request: Request, admin: Admin) -> dict[str, Any]:
        found = dead_letter_view(admin.dead_letter(request.path_params["letter_id"]))
        return {"title": f"Dead letter {found['id']}", "letter": found,
                "context": json.dumps(found["context"], indent=2)}

    def breakers(request: Request, admin: Admin) -> dict[str, Any]:
        shown = []
        for name, status in admin.breakers().items():
            history = admin.breaker_history(name)
            declared = app.registry.dependencies.get(name)
            shown.append({**breaker_view(status), "mode": declared.mode.value if declared else "",
                          "history": [breaker_event_view(e) for e in history[-_HISTORY:]][::-1]})
        return {"title": "Breakers", "breakers": shown}

    def schedules(request: Request, admin: Admin) -> dict[str, Any]:
        states = {s.name: s for s in admin.schedules()}
        declared = app.registry.schedules
        now = app.store.now()
        # A run now's key, made as the page is: the same form sent twice runs once.
        return {"title": "Schedules", "run": secrets.token_hex(8),
                "schedules": [schedule_view(states.get(name), declared.get(name), now)
                              for name in sorted(set(states) | set(declared))]}

    def outbox(request: Request, admin: Admin) -> dict[str, Any]:
        q = request.query_params
        status = q.get("status") or None
        if status is None:  # the failed ones first: they wait for an operator
            failed = admin.outbox(status="failed", limit=page_size(_number(q.get("limit"), 50)))
            rest = [admin.outbox(status=s, limit=page_size(_number(q.get("limit"), 50)))
                    for s in ("sending", "pending", "sent")]
            rows = [*failed, *(row for page in rest for row in page)]
            more = failed.more or any(page.more for page in rest)
            return {"title": "Outbox", "rows": [outbox_view(r) for r in rows], "listed": None, "more": more,
                    "statuses": [s.value for s in OutboxStatus], "next_url": None}
        found = admin.outbox(status=status, after=q.get("cursor"), limit=page_size(_number(q.get("limit"), 50)))
        return {"title": "Outbox", "rows": [outbox_view(r) for r in found], "listed": status, "more": found.more,
                "statuses": [s.value for s in OutboxStatus],
                "next_url": "?" + urlencode({"status": status, "cursor": found.next_cursor or ""})}

    router.add_api_route("/dead-letters", page("dead_letters.html", "dead-letters", dead_letters), methods=["GET"])
    router.add_api_route("/dead-letters/{letter_id}", page("dead_letter.html", "dead-letters", dead_letter),
                         methods=["GET"])
    router.add_api_route("/breakers", page("breakers.html", "breakers", breakers), methods=["GET"])
    router.add_api_route("/schedules", page("schedules.html", "schedules", schedules), methods=["GET"])

    def charts(request: Request, admin: Admin) -> dict[str, Any]:
        q = request.query_params
        window, by = q.get("window") or "1h", q.get("by") or "queue"
        found, chosen, _ = admin.charts(window, by=by)
        slot = {"1h": "minute", "24h": "hour", "7d": "6 hours"}[chosen.name]
        return {"title": "Charts", "series": drawn(found, chosen), "window": chosen.name, "by": by,
                "windows": list(WINDOWS), "slot": slot, "kept": f"{KEEP.days} days",
                "bars_h": BARS_H, "lines_h": LINES_H}

    router.add_api_route("/charts", page("charts.html", "charts", charts), methods=["GET"])
    router.add_api_route("/outbox", page("outbox.html", "outbox", outbox), methods=["GET"])

    @router.post("/dead-letters/replay")
    def replay(request: Request, csrf: str = Form(""), ids: list[str] = Form([]), start: str = Form(""),
               back: str = Form("")) -> Response:
        def apply(admin: Admin) -> Done:
            if not ids:
                raise ConfigError("select at least one dead letter")
            done = admin.replay(ids[:_BULK_MAX], from_start=start == "1")
            ran = sum(1 for r in done if r.job is not None)
            return ("replayed_from_start" if start == "1" else "replayed", {"n": ran, "skipped": len(done) - ran})

        return action(request, csrf, apply, _back(back, "/dead-letters"))

    @router.post("/dead-letters/resolve")
    def resolve(request: Request, csrf: str = Form(""), ids: list[str] = Form([]), note: str = Form(""),
                back: str = Form("")) -> Response:
        def apply(admin: Admin) -> Done:
            if not ids:
                raise ConfigError("select at least one dead letter")
            done = admin.resolve(ids[:_BULK_MAX], note=note.strip() or None)
            closed = sum(1 for r in done if r.resolved)
            return "resolved", {"n": closed, "skipped": len(done) - closed}

        return action(request, csrf, apply, _back(back, "/dead-letters"))

    @router.post("/dead-letters/matching")
    def letters_matching(request: Request, csrf: str = Form(""), confirm: str = Form(""), start: str = Form(""),
                         act: str = Form("replay"), note: str = Form(""),
                         error_class: str = Form(""), stage: str = Form(""), task: str = Form(""),
                         owner: str = Form(""), older_than_h: str = Form(""), newer_than_h: str = Form("")) -> Response:
        """Every open dead letter the list's filter matches: first a page
        with the count to confirm, then the replay or the resolve
        (``Admin.replay_matching``, ``Admin.resolve_matching``)."""
        where = {"error_class": error_class, "stage": stage, "task": task, "owner": owner,
                 "older_than_h": older_than_h, "newer_than_h": newer_than_h}
        chosen: dict[str, Any] = {"error_class": error_class or None, "stage": stage or None, "task": task or None,
                  "owner": owner or None}

        def replay(admin: Admin, dry_run: bool) -> Bulk:
            return admin.replay_matching(**chosen, older_than=_hours(older_than_h or None, "older than"),
                                         newer_than=_hours(newer_than_h or None, "newer than"),
                                         from_start=start == "1", dry_run=dry_run)

        def resolve(admin: Admin, dry_run: bool) -> Bulk:
            return admin.resolve_matching(**chosen, older_than=_hours(older_than_h or None, "older than"),
                                          newer_than=_hours(newer_than_h or None, "newer than"),
                                          note=note.strip() or None, dry_run=dry_run)

        if act == "resolve":
            return matching(request, csrf, confirm == "yes", resolve, act="resolve", where=where,
                            page="dead-letters", noun="open dead letter", done_code="resolved_matching")
        return matching(request, csrf, confirm == "yes", replay, act="replay", where=where, page="dead-letters",
                        noun="open dead letter", done_code="replayed_matching", extra={"start": start})

    @router.post("/dead-letters/{letter_id}/notes")
    def note(request: Request, letter_id: str, csrf: str = Form(""), text: str = Form("")) -> Response:
        def apply(admin: Admin) -> Done:
            if not text.strip():
                raise ConfigError("a note needs some text")
            admin.note(letter_id, text.strip())
            return "noted", {}

        return action(request, csrf, apply, f"/dead-letters/{letter_id}")

    @router.post("/breakers/{name}/open")
    def force_open(request: Request, name: str, csrf: str = Form("")) -> Response:
        return action(request, csrf, lambda a: (a.open_breaker(name), ("breaker_opened", {}))[1],
                      "/breakers")

    @router.post("/breakers/{name}/close")
    def force_close(request: Request, name: str, csrf: str = Form("")) -> Response:
        return action(request, csrf, lambda a: (a.close_breaker(name), ("breaker_closed", {}))[1],
                      "/breakers")

    @router.post("/queues/{queue}/pause")
    def pause_queue(request: Request, queue: str, csrf: str = Form("")) -> Response:
        return action(request, csrf, lambda a: ("paused" if a.pause_queue(queue) else "paused_already", {}), "/")

    @router.post("/queues/{queue}/resume")
    def resume_queue(request: Request, queue: str, csrf: str = Form("")) -> Response:
        return action(request, csrf, lambda a: ("resumed" if a.resume_queue(queue) else "not_paused", {}), "/")

    @router.post("/schedules/{name}/pause")
    def pause_schedule(request: Request, name: str, csrf: str = Form("")) -> Response:
        return action(request, csrf, lambda a: ("schedule_paused" if a.pause_schedule(name)
                                                else "schedule_paused_already", {}), "/schedules")

    @router.post("/schedules/{name}/resume")
    def resume_schedule(request: Request, name: str, csrf: str = Form("")) -> Response:
        return action(request, csrf, lambda a: ("schedule_resumed" if a.resume_schedule(name)
                                                else "schedule_not_paused", {}), "/schedules")

    @router.post("/schedules/{name}/run")
    def run_schedule(request: Request, name: str, csrf: str = Form(""), run: str = Form("")) -> Response:
        def apply(admin: Admin) -> Done:
            created = sum(not r.duplicate for r in admin.run_schedule(name, run=run))
            return ("schedule_ran", {"n": created}) if created else ("schedule_ran_already", {})

        return action(request, csrf, apply, "/schedules")

    # -- fragments that refresh by themselves ----------------------------------------

    @router.get("/_banner")
    def banner(request: Request) -> Response:
        try:
            if who(request) is None:
                return Response(status_code=204)
        except RedriveError:  # the page keeps what it shows until the store answers
            return Response(status_code=204)
        return render(request, "banner.html", held=_held(app))

    @router.get("/_counts")
    def counts(request: Request) -> Response:
        try:
            actor = who(request)
        except RedriveError:
            return Response(status_code=204)
        if actor is None:
            return Response(status_code=204)
        try:
            return render(request, "counts.html", csrf=csrf_for(request, actor), may_act=not actor.read_only,
                          **_counts(app.admin(actor)))
        except Forbidden:
            return Response(status_code=403)

    return router


_BULK_MAX = 1000  # rows one form may act on: a page's worth, generously

# What an action did, as the page it comes back to says it: a code and
# counts in the link, the words from here. Text from a link is never shown,
# so nobody can send an operator a page that says what they did not do.
Done = tuple[str, dict[str, int]]
_DONE = {
    "retried": "Retried: the job is queued again.",
    "cancel_asked": "Cancel asked.",
    "retry_selected": "Retried {n} of {of}; the rest were not failed, or not yours to retry.",
    "cancel_selected": "Cancel asked for {n} of {of}; the rest had ended, or were not yours to cancel.",
    "replayed": "Replayed {n} from the failed stage; {skipped} had been replayed already.",
    "replayed_from_start": "Replayed {n} from the start; {skipped} had been replayed already.",
    "resolved": "Resolved {n}; {skipped} had been replayed or resolved already.",
    "noted": "Note added.",
    "deleted": "Deleted: the job, its events and its dead letters are gone.",
    "breaker_opened": "Breaker forced open: its jobs are held.",
    "breaker_closed": "Breaker closed: its jobs resume.",
    "paused": "Queue paused: no worker starts its jobs until it is resumed.",
    "paused_already": "That queue was paused already.",
    "resumed": "Queue resumed.",
    "not_paused": "That queue was not paused.",
    "schedule_ran": "Ran now: {n} job(s) queued.",
    "schedule_ran_already": "That run was sent already: nothing more queued.",
    "schedule_paused": "Schedule paused: its firings are skipped until it is resumed.",
    "schedule_paused_already": "That schedule was paused already.",
    "schedule_resumed": "Schedule resumed: it fires from its next time.",
    "schedule_not_paused": "That schedule was not paused.",
    "retry_matching": "Retried {n} matching jobs; {skipped} had changed meanwhile.",
    "replayed_matching": "Replayed {n} matching dead letters; {skipped} had been replayed meanwhile.",
    "resolved_matching": "Resolved {n} matching dead letters; {skipped} had been closed meanwhile.",
    "cancel_matching": "Cancel asked for {n} matching jobs; {skipped} had changed meanwhile.",
}
_COUNTS = ("n", "of", "skipped")


def _flash(query: Any) -> str | None:
    """The line saying what was done: a known code's words, with whole counts only."""
    told = _DONE.get(query.get("done") or "")
    counts = {name: query.get(name) or "0" for name in _COUNTS}
    if told is None or not all(value.isdigit() and len(value) <= 9 for value in counts.values()):
        return None
    return told.format(**{name: int(value) for name, value in counts.items()})
_HISTORY = 5  # state changes shown per breaker
_CHART_MINUTES = 60


def _counts(admin: Admin) -> dict[str, Any]:
    if not admin.actor.is_operator:
        return {"queues": [], "workers": [], "charts": {}}
    found, now = admin.workers()
    queues = [queue_view(q) for q in admin.queues()]
    charts = _charts(admin.finished_per_minute(_CHART_MINUTES), now)  # the store's time, read with the workers
    idle = sorted(set(charts) - {q["queue"] for q in queues})  # drained, but busy this last hour
    queues += [{"queue": name, "counts": {}, "estimated": False, "at_least": False, "oldest_due_age_s": None,
                "paused": False, "paused_by": None} for name in idle]
    return {"queues": queues, "workers": workers_view(found, now), "charts": charts, "exact_up_to": EXACT_UP_TO,
            "lower_bound_at": LOWER_BOUND_AT}


def _charts(counts: list[MinuteCount], now: datetime) -> dict[str, dict[str, Any]]:
    """Per queue, the last hour as bars a minute wide: jobs that succeeded,
    and on top those that failed for good, scaled to the queue's busiest
    minute. Only minutes with an ending get a bar (the rest draw nothing).
    The bars are written here, not in the template: the overview refreshes
    every few seconds, and 60 bars a queue through Jinja cost more than all
    of its queries (docs/performance.md)."""
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=_CHART_MINUTES - 1)
    first = start.timestamp()
    per: dict[str, dict[int, list[int]]] = {}
    for c in counts:
        slot = int(c.minute.timestamp() - first) // 60
        if 0 <= slot < _CHART_MINUTES and c.status is not Status.CANCELLED:
            per.setdefault(c.queue, {}).setdefault(slot, [0, 0])[c.status is Status.FAILED] += c.count
    times = [f"{start + timedelta(minutes=slot):%H:%M}" for slot in range(_CHART_MINUTES)]
    charts = {}
    for queue, minutes in per.items():
        peak = max(ok + failed for ok, failed in minutes.values()) or 1
        bars = []
        for slot, (ok, failed) in sorted(minutes.items()):
            ok_h, failed_h = round(ok * _CHART_H / peak, 1), round(failed * _CHART_H / peak, 1)
            bars.append(
                f"<g><title>{times[slot]} UTC: {ok} succeeded, {failed} failed</title>"
                + (f'<rect class="ok" x="{slot * 4}" y="{_CHART_H - ok_h - failed_h:.1f}" width="3" height="{ok_h}"/>'
                   if ok else "")
                + (f'<rect class="failed" x="{slot * 4}" y="{_CHART_H - failed_h:.1f}" width="3" height="{failed_h}"/>'
                   if failed else "")
                + "</g>")
        # only numbers and fixed words go into the bars: nothing to escape
        charts[queue] = {"bars": Markup("".join(bars)), "peak": peak, "height": _CHART_H,
                         "succeeded": sum(m[0] for m in minutes.values()),
                         "failed": sum(m[1] for m in minutes.values())}
    return charts


_CHART_H = 28


def _when(text: str | None, name: str) -> datetime | None:
    """A time from a form's datetime-local field (or ISO 8601), read as UTC when it names no zone."""
    if not text:
        return None
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{name} is not a time: {text[:40]!r} (use YYYY-MM-DDTHH:MM)") from None
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def _hours(text: str | None, name: str) -> timedelta | None:
    if not text:
        return None
    try:
        hours = float(text)
    except ValueError:
        raise ConfigError(f"{name} is a number of hours, not {text[:40]!r}") from None
    if not 0 <= hours <= 24 * 366 * 10:
        raise ConfigError(f"{name} is 0 to 87840 hours, not {text[:40]!r}")
    return timedelta(hours=hours)


def _here(request: Request) -> str:
    """This page's path and query below the dashboard's prefix, without the
    last action's message: where a form on it comes back to."""
    base = request.scope.get("root_path", "")
    path = request.url.path
    if base and path.startswith(base):
        path = path[len(base):] or "/"
    query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "done"])
    return path + ("?" + query if query else "")


def _back(path: str, default: str) -> str:
    """Where a form returns to: a page of this dashboard, never another site."""
    if path.startswith("/") and not path.startswith("//") and "\\" not in path:
        return path
    return default


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
