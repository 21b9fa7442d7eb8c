"""The login form (a token in, a session cookie out) and the logout."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
import hmac
import secrets

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from redrive.http.auth import digest
from redrive.http.dashboard.base import refused
from redrive.http.dashboard.render import SECURITY_HEADERS, base_of, render
from redrive.http.dashboard.session import COOKIE, SESSION_TTL, csrf_for, same_site, who
from redrive.http.surface import caller_address, surface

router = APIRouter(include_in_schema=False)


@router.get("/login")
def login_form(request: Request) -> Response:
    return render(request, "login.html")


@router.post("/login")
def login(request: Request, token: str = Form("")) -> Response:
    on = surface(request)
    on.throttle.check(caller_address(request))
    base = base_of(request)
    if on.tokens is None or not same_site(request) or on.tokens.actor(token) is None:
        return render(request, "login.html", http_status=401, error="That token is not valid here.")
    session = secrets.token_urlsafe(32)
    on.app.store.session_open(id=digest(session), principal=digest(token), ttl=SESSION_TTL)
    response = RedirectResponse(f"{base}/", status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(COOKIE, session, httponly=True, samesite="strict", secure=request.url.scheme == "https",
                        path=base or "/", max_age=int(SESSION_TTL.total_seconds()))
    return response


@router.post("/logout")
def logout(request: Request, csrf: str = Form("")) -> Response:
    base = base_of(request)
    actor = who(request)
    if actor is None or not same_site(request) or not hmac.compare_digest(csrf, csrf_for(request, actor)):
        return refused(request, 403, "this form did not come from this dashboard")
    if cookie := request.cookies.get(COOKIE):
        surface(request).app.store.session_close(id=digest(cookie))
    response = RedirectResponse(f"{base}/login", status_code=303, headers=SECURITY_HEADERS)
    response.delete_cookie(COOKIE, path=base or "/")
    return response
