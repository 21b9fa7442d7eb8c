"""How the dashboard writes a page: its templates (Jinja2, autoescaped),
the filters they show times with, the headers every page carries, and the
line saying what an action did, from a fixed set of words."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, pass_context
from jinja2.runtime import Context
from markupsafe import Markup

from redrive.errors import RedriveError
from redrive.http.surface import surface

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def when_shown(value: str | datetime | None) -> str:
    """A time as people read it: to the second, in UTC, with the zone said."""
    if not value:
        return "–"
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration_shown(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    return f"{minutes // 60} h {minutes % 60} min"


def ago_shown(value: str | datetime | None, now: datetime | None = None) -> Markup:
    """A time relative to ``now`` ("3 min ago", "in 2 h"), the exact UTC time
    on hover. Pages pass the database's clock: the times shown are its, and
    this server's own clock may be off (docs/storage.md)."""
    if not value:
        return Markup("–")
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    seconds = ((now or datetime.now(UTC)) - at).total_seconds()
    span = abs(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if span >= size:
            amount = f"{int(span // size)} {unit}"
            break
    else:
        amount = f"{int(span)} s"
    said = "just now" if span < 1 else (f"{amount} ago" if seconds >= 0 else f"in {amount}")
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        at.astimezone(UTC).isoformat(), when_shown(at), said)


@pass_context
def _ago(context: Context, value: str | datetime | None) -> Markup:
    return ago_shown(value, context.get("now"))


_TEMPLATES = Environment(loader=PackageLoader("redrive.http", "templates"), autoescape=True)
_TEMPLATES.filters |= {"when": when_shown, "ago": _ago, "duration": duration_shown}


def _database_now(request: Request) -> datetime | None:
    """The database's clock, for the times a page shows relative to now; a
    page that says the database is down uses this server's own."""
    try:
        return surface(request).app.store.now()
    except RedriveError:
        return None


def render(request: Request, template: str, http_status: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("base", base_of(request))
    context.setdefault("now", _database_now(request))
    html = _TEMPLATES.get_template(template).render(request=request, **context)
    return HTMLResponse(html, status_code=http_status, headers=SECURITY_HEADERS)


def base_of(request: Request) -> str:
    """The dashboard's prefix, where the host app mounted it ("" at the root)."""
    return str(request.scope.get("root_path", ""))


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
    "workflow_cancelled": "Workflow cancelled: nothing in it starts any more; its running steps were asked to stop.",
    "workflow_retried": "Retried {n} failed step(s): what they blocked runs after them.",
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


def flash(query: Any) -> str | None:
    """The line saying what was done: a known code's words, with whole counts only."""
    told = _DONE.get(query.get("done") or "")
    counts = {name: query.get(name) or "0" for name in _COUNTS}
    if told is None or not all(value.isdigit() and len(value) <= 9 for value in counts.values()):
        return None
    return told.format(**{name: int(value) for name, value in counts.items()})
