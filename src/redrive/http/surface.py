"""What the API's routes and the dashboard's pages act on, kept on the
ASGI app (``request.app.state.redrive``), so each route and page is a plain
function at module level that reads it: the app, who may call, how often,
and the dashboard's secret for its forms."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from redrive.app import App
from redrive.http.auth import Auth, TokenAuth
from redrive.http.throttle import Throttle


@dataclass
class Surface:
    app: App
    auth: Auth
    throttle: Throttle
    # CSRF tokens are HMACs under this secret: set REDRIVE_DASHBOARD_SECRET
    # when several server processes share the users (else each has its own).
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    metrics: Any = None  # redrive.metrics.Metrics, with the metrics extra

    @property
    def tokens(self) -> TokenAuth | None:
        """The tokens a dashboard login checks (None: the host app's own login)."""
        return self.auth if isinstance(self.auth, TokenAuth) else None


def surface(request: Request) -> Surface:
    found: Surface = request.app.state.redrive
    return found


def caller_address(request: Request) -> str:
    """A caller without a principal, as the throttle counts it: by its address."""
    return f"anonymous@{request.client.host if request.client else '?'}"
