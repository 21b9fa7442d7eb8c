"""``/api/v1/queues`` and ``/api/v1/charts`` (operators): each queue's active
jobs, what ended per minute, the charts, and pausing a queue."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
from typing import Annotated, Literal

from fastapi import Query

from redrive.http import responses as out
from redrive.http.api.callers import Answer, Operator, resource
from redrive.http.models import Strict
from redrive.views import chart_view, minute_view, queue_view

router = resource("queues")


@router.get("/queues", response_model=out.Queues)
def queues(ops: Operator) -> Answer:
    """Per queue: active jobs by state, the oldest due job's wait, paused or not."""
    return {"items": [queue_view(q) for q in ops.queues()]}


@router.get("/queues/throughput", response_model=out.Throughput)
def throughput(ops: Operator, minutes: Annotated[int, Query(ge=1, le=1440)] = 60) -> Answer:
    """Jobs that ended per queue, minute and outcome over the last ``minutes``
    (minutes older than two hours come folded into their hour's first)."""
    return {"items": [minute_view(c) for c in ops.finished_per_minute(minutes)]}


@router.get("/charts", response_model=out.Charts)
def charts(ops: Operator, window: Annotated[Literal["1h", "24h", "7d"], Query()] = "1h",
           by: Annotated[Literal["queue", "task"], Query()] = "queue") -> Answer:
    """Attempts ended per slot (a minute, an hour or six) by how they
    ended, with duration and queue-wait percentiles, per queue or per
    task: from the rollups, so they outlive pruned history."""
    found, chosen, now = ops.charts(window, by=by)
    return chart_view(found, chosen, now, by)


@router.post("/queues/{queue}/pause", response_model=out.QueueChange)
def pause(queue: str, ops: Operator, body: Strict | None = None) -> Answer:
    """No worker starts the queue's jobs until it is resumed; running ones go on."""
    return {"queue": queue, "changed": ops.pause_queue(queue)}


@router.post("/queues/{queue}/resume", response_model=out.QueueChange)
def resume(queue: str, ops: Operator, body: Strict | None = None) -> Answer:
    return {"queue": queue, "changed": ops.resume_queue(queue)}
