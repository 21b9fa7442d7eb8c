"""redrive's HTTP surface: the JSON API under ``/api/v1``, health checks, and
the dashboard. Needs the ``web`` extra: ``pip install redrive[web]``.

    from redrive.http import create_api
    api = create_api(app)                     # tokens from REDRIVE_API_TOKENS
    api = create_api(app, auth=my_login)      # or your service's own login

``create_api`` returns an ASGI app: serve it with ``redrive serve``, or mount
it inside your own FastAPI or Starlette service.
"""

from __future__ import annotations

from redrive.app import App
from redrive.errors import ConfigError

try:
    from fastapi import FastAPI
    from fastapi.staticfiles import StaticFiles
except ImportError as exc:  # the engine runs without the web extra
    raise ConfigError("the HTTP API needs the web extra: pip install 'redrive[web]'") from exc

from redrive.http import errors
from redrive.http.api import health, routes
from redrive.http.auth import Auth, TokenAuth, tokens_from_env
from redrive.http.dashboard import pages
from redrive.http.limits import DEFAULT_MAX_BODY, BodyLimit
from redrive.http.surface import Surface
from redrive.http.throttle import Throttle, rate_limit_from_env

__all__ = ["Auth", "TokenAuth", "create_api", "tokens_from_env"]


def create_api(app: App, *, auth: Auth | None = None, max_body: int = DEFAULT_MAX_BODY,
               rate_limit: str | None = None) -> FastAPI:
    """The API on ``app``'s database, with its tasks. ``auth`` maps a request
    to an ``Actor`` (or None: 401); by default, bearer tokens from the
    environment (redrive.http.auth). ``rate_limit`` is per caller, like
    ``6000/minute`` or ``off``; by default ``REDRIVE_API_RATE_LIMIT`` or
    6000/minute (redrive.http.throttle)."""
    api = FastAPI(title="redrive", version="1", docs_url="/api/v1/docs", redoc_url=None,
                  openapi_url="/api/v1/openapi.json")
    errors.install(api)
    throttle = Throttle(rate_limit if rate_limit is not None else rate_limit_from_env())
    on = api.state.redrive = Surface(app, auth or TokenAuth(tokens_from_env()), throttle)
    if secret := app.settings.dashboard_secret:
        on.secret = secret.encode()
    try:
        from redrive.metrics import Metrics
    except ConfigError:  # no metrics extra: no /metrics
        pass
    else:
        on.metrics = Metrics(app)
    api.include_router(routes(metrics=on.metrics is not None))
    api.include_router(pages)
    api.mount("/static", StaticFiles(packages=[("redrive.http", "static")]), name="static")
    api.include_router(health.router)
    api.add_middleware(BodyLimit, max_body=max_body)
    return api
