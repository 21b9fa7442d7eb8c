"""The dashboard: server-rendered pages (Jinja2, autoescaped) over the same
``Admin`` and views as the API, with htmx (vendored in ``static/``) to
refresh counts and the breaker banner without a reload. A module per
resource, each with its router of pages and form actions at module level;
``base`` is what each page and form goes through, ``session`` who is
looking, ``render`` how a page is written. Every page forbids inline script
and framing (``render.SECURITY_HEADERS``). docs/dashboard.md."""

from __future__ import annotations

from fastapi import APIRouter

from redrive.http.dashboard import controls, dead_letters, jobs, login, overview, workflows

__all__ = ["pages"]

pages = APIRouter(include_in_schema=False)
for _module in (login, overview, jobs, workflows, dead_letters, controls):
    pages.include_router(_module.router)
