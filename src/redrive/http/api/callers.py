"""Who calls the API, settled once per request: ``actor`` (their token, counted
by the throttle), ``admin`` (the operator API acting as them) and
``operator`` (the same, for operators only); and ``CallerFirst``, the
route class every API router uses so that a caller is known, and refused
if need be, before their body is read."""

# No ``from __future__ import annotations``: FastAPI reads these annotations.
from collections.abc import Callable, Coroutine, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer

from redrive.admin import Actor, Admin
from redrive.errors import Forbidden
from redrive.http.errors import Unauthorized
from redrive.http.surface import caller_address, surface

_BEARER = HTTPBearer(auto_error=False, bearerFormat="redrive API token",
                     description="A token from REDRIVE_API_TOKENS: `Authorization: Bearer <token>`")


def actor(request: Request, _: Annotated[Any, Security(_BEARER)] = None) -> Actor:
    # _BEARER only declares the scheme in the OpenAPI document (Swagger's
    # Authorize button, generated clients); ``auth`` reads the request.
    if (known := getattr(request.state, "redrive_actor", None)) is not None:
        return known  # settled by the route before its body was read: counted once
    on = surface(request)
    found = on.auth(request)
    # A caller without a valid token is counted by its address: guessing
    # tokens is throttled too.
    on.throttle.check(found.name if found is not None else caller_address(request))
    if found is None:
        raise Unauthorized("send a valid API token in the Authorization header")
    return found


def admin(request: Request, who: Annotated[Actor, Depends(actor)]) -> Admin:
    return surface(request).app.admin(who)


def operator(request: Request, who: Annotated[Actor, Depends(actor)]) -> Admin:
    """Operator-only routes say so before they look at the request (Admin checks again)."""
    if not who.is_operator:
        raise Forbidden("only an operator may do this")
    return surface(request).app.admin(who)


Answer = Mapping[str, Any]  # a route's answer, checked against its response model
Caller = Annotated[Actor, Depends(actor)]
Acting = Annotated[Admin, Depends(admin)]
Operator = Annotated[Admin, Depends(operator)]


class CallerFirst(APIRoute):
    """FastAPI reads and checks a body before it runs a route's
    dependencies, so an anonymous caller's malformed JSON would get 422
    and an owner's post to an operator route 415. This route settles who
    is calling, and whether they may call it, before the body is read."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()
        named = _depends_on(self.dependant, actor)
        operators_only = _depends_on(self.dependant, operator)

        async def caller_first(request: Request) -> Response:
            if named:
                request.state.redrive_actor = who = await run_in_threadpool(actor, request)
                if operators_only and not who.is_operator:
                    raise Forbidden("only an operator may do this")
                if request.method == "POST" and _has_body(request) and _media(request) != "application/json":
                    raise HTTPException(415, "send the request body as application/json")
            return await handle(request)

        return caller_first


def resource(tag: str) -> APIRouter:
    """The router of one resource of the API, under /api/v1."""
    return APIRouter(prefix="/api/v1", route_class=CallerFirst, tags=[tag])


def _depends_on(dependant: Dependant, fn: Callable[..., Any]) -> bool:
    return any(d.call is fn or _depends_on(d, fn) for d in dependant.dependencies)


def _has_body(request: Request) -> bool:
    return request.headers.get("content-length", "") not in ("", "0") or "transfer-encoding" in request.headers


def _media(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()
