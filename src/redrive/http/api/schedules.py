"""``/api/v1/schedules`` (operators): how far each schedule fired and its
next firings; pausing, resuming and firing one now."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
import uuid
from typing import Annotated

from fastapi import Header, Request

from redrive.http import responses as out
from redrive.http.api.callers import Answer, Operator, resource
from redrive.http.models import Strict
from redrive.http.surface import surface
from redrive.views import job_view, schedule_view

router = resource("schedules")


@router.get("/schedules", response_model=out.Schedules)
def schedules(request: Request, ops: Operator) -> Answer:
    """Each schedule: how far it fired, and per time zone the next firing
    and the key of the last one."""
    app = surface(request).app
    states = {s.name: s for s in ops.schedules()}
    declared = app.registry.schedules
    now = app.store.now()
    return {"items": [schedule_view(states.get(name), declared.get(name), now)
                      for name in sorted(set(states) | set(declared))]}


@router.post("/schedules/{name}/pause", response_model=out.ScheduleChange)
def pause_schedule(name: str, ops: Operator, body: Strict | None = None) -> Answer:
    """Schedulers skip its firings until it is resumed; skipped ones are not caught up."""
    return {"schedule": name, "changed": ops.pause_schedule(name)}


@router.post("/schedules/{name}/resume", response_model=out.ScheduleChange)
def resume_schedule(name: str, ops: Operator, body: Strict | None = None) -> Answer:
    return {"schedule": name, "changed": ops.resume_schedule(name)}


@router.post("/schedules/{name}/run", response_model=out.ScheduleRun)
def run_schedule(name: str, ops: Operator, body: Strict | None = None,
                 idempotency_key: Annotated[str | None, Header(max_length=64)] = None) -> Answer:
    """Fire it now, one job per time zone (and entity). With an
    ``Idempotency-Key`` header the same key fires once; without, each
    call fires anew."""
    made = ops.run_schedule(name, run=idempotency_key or uuid.uuid4().hex)
    return {"schedule": name, "created": sum(not r.duplicate for r in made),
            "items": [{**job_view(r.job), "duplicate": r.duplicate} for r in made]}
