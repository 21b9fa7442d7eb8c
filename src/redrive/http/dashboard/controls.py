"""The pages of what operators control: the breakers (their state and
history, forced open or closed), the schedules (paused, resumed, fired now),
the outbox, and the charts of how jobs ended."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
import secrets
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from redrive.admin import Admin
from redrive.core.outbox import OutboxStatus
from redrive.core.rollups import KEEP, WINDOWS
from redrive.http.dashboard.base import action, number, page
from redrive.http.dashboard.drawing import BARS_H, LINES_H, drawn
from redrive.http.dashboard.render import Done
from redrive.http.surface import surface
from redrive.store.reads import page_size
from redrive.views import breaker_event_view, breaker_view, outbox_view, schedule_view

router = APIRouter(include_in_schema=False)
_HISTORY = 5  # state changes shown per breaker


@router.get("/breakers")
def breakers(request: Request) -> Response:
    def build(request: Request, admin: Admin) -> dict[str, Any]:
        shown = []
        declared = surface(request).app.registry.dependencies
        for name, status in admin.breakers().items():
            history = admin.breaker_history(name)
            mode = declared[name].mode.value if name in declared else ""
            shown.append({**breaker_view(status), "mode": mode,
                          "history": [breaker_event_view(e) for e in history[-_HISTORY:]][::-1]})
        return {"title": "Breakers", "breakers": shown}

    return page(request, "breakers.html", "breakers", build)


@router.post("/breakers/{name}/open")
def force_open(request: Request, name: str, csrf: str = Form("")) -> Response:
    return action(request, csrf, lambda a: (a.open_breaker(name), ("breaker_opened", {}))[1], "/breakers")


@router.post("/breakers/{name}/close")
def force_close(request: Request, name: str, csrf: str = Form("")) -> Response:
    return action(request, csrf, lambda a: (a.close_breaker(name), ("breaker_closed", {}))[1], "/breakers")


@router.get("/schedules")
def schedules(request: Request) -> Response:
    def build(request: Request, admin: Admin) -> dict[str, Any]:
        app = surface(request).app
        states = {s.name: s for s in admin.schedules()}
        declared = app.registry.schedules
        now = app.store.now()
        # A run now's key, made as the page is: the same form sent twice runs once.
        return {"title": "Schedules", "run": secrets.token_hex(8),
                "schedules": [schedule_view(states.get(name), declared.get(name), now)
                              for name in sorted(set(states) | set(declared))]}

    return page(request, "schedules.html", "schedules", build)


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


@router.get("/outbox")
def outbox(request: Request) -> Response:
    return page(request, "outbox.html", "outbox", _outbox)


def _outbox(request: Request, admin: Admin) -> dict[str, Any]:
    q = request.query_params
    status, size = q.get("status") or None, page_size(number(q.get("limit"), 50))
    if status is None:  # the failed ones first: they wait for an operator
        pages = [admin.outbox(status=s, limit=size) for s in ("failed", "sending", "pending", "sent")]
        return {"title": "Outbox", "rows": [outbox_view(r) for p in pages for r in p], "listed": None,
                "more": any(p.more for p in pages), "statuses": [s.value for s in OutboxStatus], "next_url": None}
    found = admin.outbox(status=status, after=q.get("cursor"), limit=size)
    return {"title": "Outbox", "rows": [outbox_view(r) for r in found], "listed": status, "more": found.more,
            "statuses": [s.value for s in OutboxStatus],
            "next_url": "?" + urlencode({"status": status, "cursor": found.next_cursor or ""})}


@router.get("/charts")
def charts(request: Request) -> Response:
    def build(request: Request, admin: Admin) -> dict[str, Any]:
        q = request.query_params
        by = q.get("by") or "queue"
        found, chosen, _ = admin.charts(q.get("window") or "1h", by=by)
        slot = {"1h": "minute", "24h": "hour", "7d": "6 hours"}[chosen.name]
        return {"title": "Charts", "series": drawn(found, chosen), "window": chosen.name, "by": by,
                "windows": list(WINDOWS), "slot": slot, "kept": f"{KEEP.days} days", "bars_h": BARS_H,
                "lines_h": LINES_H}

    return page(request, "charts.html", "charts", build)
