"""``/api/v1/breakers`` (operators): each dependency's breaker, its history,
and forcing it open or closed."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
from redrive.errors import UnknownDependency
from redrive.http import responses as out
from redrive.http.api.callers import Answer, Operator, resource
from redrive.http.models import Strict
from redrive.views import breaker_event_view, breaker_view

router = resource("breakers")


@router.get("/breakers", response_model=out.Breakers)
def breakers(ops: Operator) -> Answer:
    """Each dependency's breaker: state, failure rate in its window, time open."""
    return {"items": [breaker_view(b) for b in ops.breakers().values()]}


@router.get("/breakers/{name}", response_model=out.BreakerWithHistory)
def breaker(name: str, ops: Operator) -> Answer:
    """One breaker, with its state changes, oldest first."""
    found = ops.breakers().get(name)
    if found is None:
        raise UnknownDependency(f"no breaker named {name!r}")
    return {**breaker_view(found), "history": [breaker_event_view(e) for e in ops.breaker_history(name)]}


@router.post("/breakers/{name}/open", response_model=out.Breaker)
def open_breaker(name: str, ops: Operator, body: Strict | None = None) -> Answer:
    """Force it open until it is closed by hand."""
    return breaker_view(ops.open_breaker(name))


@router.post("/breakers/{name}/close", response_model=out.Breaker)
def close_breaker(name: str, ops: Operator, body: Strict | None = None) -> Answer:
    """Close it with a fresh window."""
    return breaker_view(ops.close_breaker(name))
