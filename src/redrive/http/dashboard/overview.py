"""The overview: each queue's counts and last hour, the workers, pausing a
queue; and the fragments htmx refreshes by themselves (the counts, the
breaker banner)."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from markupsafe import Markup

from redrive.admin import Admin
from redrive.core.states import Status
from redrive.errors import Forbidden, RedriveError
from redrive.http.dashboard.base import action, held, page
from redrive.http.dashboard.render import render
from redrive.http.dashboard.session import csrf_for, who
from redrive.http.surface import surface
from redrive.store.reads import EXACT_UP_TO, LOWER_BOUND_AT, MinuteCount
from redrive.views import queue_view, workers_view

router = APIRouter(include_in_schema=False)
_CHART_MINUTES = 60
_CHART_H = 28


@router.get("/")
def overview(request: Request) -> Response:
    return page(request, "overview.html", "overview", lambda request, admin: {"title": "Overview", **_counts(admin)})


@router.post("/queues/{queue}/pause")
def pause_queue(request: Request, queue: str, csrf: str = Form("")) -> Response:
    return action(request, csrf, lambda a: ("paused" if a.pause_queue(queue) else "paused_already", {}), "/")


@router.post("/queues/{queue}/resume")
def resume_queue(request: Request, queue: str, csrf: str = Form("")) -> Response:
    return action(request, csrf, lambda a: ("resumed" if a.resume_queue(queue) else "not_paused", {}), "/")


@router.get("/_banner")
def banner(request: Request) -> Response:
    try:
        if who(request) is None:
            return Response(status_code=204)
    except RedriveError:  # the page keeps what it shows until the store answers
        return Response(status_code=204)
    return render(request, "banner.html", held=held(surface(request).app))


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
                      **_counts(surface(request).app.admin(actor)))
    except Forbidden:
        return Response(status_code=403)


def _counts(admin: Admin) -> dict[str, Any]:
    if not admin.actor.is_operator:
        return {"queues": [], "workers": [], "charts": {}}
    found, now = admin.workers()
    queues: list[Any] = [queue_view(q) for q in admin.queues()]
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
    of its queries (bench/NOTES.md)."""
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
