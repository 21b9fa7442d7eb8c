"""What the API answers, field by field: the allowlist of what may leave the
server. Each route's answer is checked against its model before it is sent,
and every model forbids fields it does not name, so a field a view lets
through that the API does not name (a lease token) fails the request and
the tests rather than reaching a client. The OpenAPI document carries the
same schemas, with ``additionalProperties: false``.

The models of records (jobs, events, dead letters, breakers, queues,
workers, ...) are derived from the shapes their views declare
(``redrive.views.shapes``), so a view and its model cannot drift apart;
the rest are the API's own envelopes.
"""

# mypy: disable-error-code="valid-type,misc"
# (the derived models are values to mypy, types to pydantic and FastAPI)
from __future__ import annotations

import types
import typing
from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from redrive.views import shapes
from redrive.views.shapes import Timestamp


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


T = TypeVar("T")


class Page(Closed, Generic[T]):
    """Newest first (the outbox: oldest first); pass ``next_cursor`` back as ``cursor``."""

    items: list[T]
    next_cursor: str | None
    more: bool


def paged(model: type[Closed]) -> type[Closed]:
    """A page of ``model``'s records."""
    return Page[model]


_DERIVED: dict[type, type[Closed]] = {}


def derived(shape: type, name: str | None = None) -> type[Closed]:
    """The closed model of a view's shape: its fields, their types (a time
    as a date-time, a nested shape as its own model) and their lines as
    descriptions."""
    if shape in _DERIVED:
        return _DERIVED[shape]
    fields: dict[str, Any] = {}
    for field, hint in get_type_hints(shape, include_extras=True).items():
        about = None
        if get_origin(hint) is Annotated:
            hint, *extras = get_args(hint)
            about = next((e for e in extras if isinstance(e, str)), None)
        fields[field] = (_model_type(hint), Field(description=about))
    model = create_model(name or shape.__name__.removesuffix("Shape"), __base__=Closed, **fields)
    model.__doc__ = shape.__doc__ if shape.__doc__ and not shape.__doc__.startswith(shape.__name__ + "(") else None
    _DERIVED[shape] = model
    return model


def _model_type(hint: Any) -> Any:
    """A shape's type as the model's: ``Timestamp`` is a date-time, a shape a
    model, and so inside lists, dicts and unions."""
    if hint is Timestamp:
        return datetime
    if typing.is_typeddict(hint):
        return derived(hint)
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return Union[tuple(_model_type(a) for a in args)]  # noqa: UP007  (built from a tuple)
    if origin in (list, dict):
        return origin[tuple(_model_type(a) for a in args)]
    return hint


Job = derived(shapes.JobShape)
Event = derived(shapes.EventShape)


Progress = derived(shapes.ProgressShape)


class JobWithEvents(Job):
    progress: Progress | None = Field(description="what the running task last said of how far it got "
                                                  "(redrive.progress); null if it said nothing")
    events: list[Event] = Field(description="oldest first")


class Enqueued(Job):
    duplicate: bool = Field(description="an earlier enqueue with the same key made this job")


class Batch(Closed):
    items: list[Enqueued]


DeadLetter = derived(shapes.DeadLetterShape)
Facets = derived(shapes.FacetsShape)


class Replayed(Closed):
    dead_letter: DeadLetter
    job: Job | None = Field(description="null: the letter was replayed already")


class Replays(Closed):
    items: list[Replayed]


class DeadLetters(Closed):
    items: list[DeadLetter]


class Bulk(Closed):
    action: str
    matched: int = Field(description="jobs the filter matched, of those the action applies to")
    done: int = Field(description="jobs acted on (0 on a dry run)")
    skipped: int = Field(description="jobs someone else changed meanwhile")
    dry_run: bool


Breaker = derived(shapes.BreakerShape)
BreakerEvent = derived(shapes.BreakerEventShape)


class BreakerWithHistory(Breaker):
    history: list[BreakerEvent] = Field(description="oldest first")


class Breakers(Closed):
    items: list[Breaker]


Queue = derived(shapes.QueueShape)


class Queues(Closed):
    items: list[Queue]


MinuteCount = derived(shapes.MinuteShape, "MinuteCount")


class Throughput(Closed):
    items: list[MinuteCount] = Field(description="oldest minute first; minutes with no ended job are left out")


Charts = derived(shapes.ChartsShape)


class QueueChange(Closed):
    queue: str
    changed: bool = Field(description="false: it was paused (or running) already")


Worker = derived(shapes.WorkerShape)


class Workers(Closed):
    items: list[Worker]


Schedule = derived(shapes.ScheduleShape)


class Schedules(Closed):
    items: list[Schedule]


OutboxRow = derived(shapes.OutboxShape, "OutboxRow")
Workflow = derived(shapes.WorkflowShape)


Workflows = paged(Workflow)


class Jobs(Closed):
    items: list[Job]


class Health(Closed):
    status: Literal["ok", "ready"]


class ErrorDetail(Closed):
    code: str = Field(description="one of redrive's error codes, e.g. FORBIDDEN, STORE_UNAVAILABLE")
    message: str = Field(description="one line")


class Error(Closed):
    error: ErrorDetail


# Every route may answer these; each one's body is an ``Error``.
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": Error, "description": text}
    for status, text in {
        400: "bad request", 401: "no valid token", 403: "not the caller's to see or do",
        404: "no such object", 409: "not in a state that allows it", 413: "body too large",
        415: "not JSON", 422: "invalid request", 429: "too many requests: see Retry-After",
        503: "the store is unavailable",
    }.items()
}


AuditEntry = derived(shapes.AuditShape, "AuditEntry")


class Audit(Closed):
    items: list[AuditEntry]


class ScheduleChange(Closed):
    schedule: str
    changed: bool = Field(description="false: it was paused (or firing) already")


class ScheduleRun(Closed):
    schedule: str
    created: int = Field(description="jobs queued now; 0 when this run's key was sent already")
    items: list[Enqueued]
