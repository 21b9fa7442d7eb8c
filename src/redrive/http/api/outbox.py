"""``/api/v1/outbox`` (operators): the side effects' rows, the failed ones
awaiting an operator first when asked."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
from typing import Annotated

from fastapi import Query

from redrive.core.outbox import OutboxStatus
from redrive.http import responses as out
from redrive.http.api.callers import Answer, Operator, resource
from redrive.store.reads import page_size
from redrive.views import outbox_view, page_view

router = resource("outbox")


@router.get("/outbox", response_model=out.paged(out.OutboxRow))
def outbox(ops: Operator, status: OutboxStatus | None = None, job_id: str | None = None, cursor: str | None = None,
           limit: Annotated[int, Query(ge=1)] = 50) -> Answer:
    """Outbox rows, oldest first; ``status=failed`` lists what awaits an operator."""
    return page_view(ops.outbox(status=status, job_id=job_id, after=cursor, limit=page_size(limit)), outbox_view)
