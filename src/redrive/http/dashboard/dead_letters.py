"""The dead letters list (filters, facets, pages), a letter's page, and the
actions on letters: replay, resolve, annotate; the selected ones, every match."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
import json
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from redrive.admin import Admin, Bulk
from redrive.core.job import LETTER_STATES
from redrive.errors import ConfigError
from redrive.http.dashboard.base import BULK_MAX, action, back_to, hours, matching, number, page
from redrive.http.dashboard.render import Done
from redrive.store.reads import page_size
from redrive.views import dead_letter_view, facets_view

router = APIRouter(include_in_schema=False)


@router.get("/dead-letters")
def dead_letters(request: Request) -> Response:
    return page(request, "dead_letters.html", "dead-letters", _listed)


def _listed(request: Request, admin: Admin) -> dict[str, Any]:
    q = request.query_params
    where: dict[str, Any] = {k: q.get(k) or None for k in ("error_class", "stage", "task", "owner", "state")}
    if where["state"] is not None and where["state"] not in LETTER_STATES:
        raise ConfigError(f"no dead-letter state named {where['state']!r}")
    ages: dict[str, Any] = {"older_than": hours(q.get("older_than_h"), "older than"),
                            "newer_than": hours(q.get("newer_than_h"), "newer than")}
    found = admin.dead_letters(**where, **ages, after=q.get("cursor"), limit=page_size(number(q.get("limit"), 50)))
    facets = admin.dead_letter_facets(**where, **ages)
    params = {k: v for k, v in q.items() if v and k != "cursor"}
    return {"title": "Dead letters", "letters": [dead_letter_view(d) for d in found], "where": where,
            "ages": {k: q.get(f"{k}_h") or "" for k in ages}, "facets": facets_view(facets),
            "states": LETTER_STATES, "next_cursor": found.next_cursor,
            "facet_url": lambda key, value: "?" + urlencode({**params, key: value}),
            "next_url": "?" + urlencode({**params, "cursor": found.next_cursor or ""})}


@router.get("/dead-letters/{letter_id}")
def dead_letter(request: Request) -> Response:
    return page(request, "dead_letter.html", "dead-letters", _letter)


def _letter(request: Request, admin: Admin) -> dict[str, Any]:
    found = dead_letter_view(admin.dead_letter(request.path_params["letter_id"]))
    return {"title": f"Dead letter {found['id']}", "letter": found, "context": json.dumps(found["context"], indent=2)}


@router.post("/dead-letters/replay")
def replay(request: Request, csrf: str = Form(""), ids: list[str] = Form([]), start: str = Form(""),
           back: str = Form("")) -> Response:
    def apply(admin: Admin) -> Done:
        if not ids:
            raise ConfigError("select at least one dead letter")
        done = admin.replay(ids[:BULK_MAX], from_start=start == "1")
        ran = sum(1 for r in done if r.job is not None)
        return ("replayed_from_start" if start == "1" else "replayed", {"n": ran, "skipped": len(done) - ran})

    return action(request, csrf, apply, back_to(back, "/dead-letters"))


@router.post("/dead-letters/resolve")
def resolve(request: Request, csrf: str = Form(""), ids: list[str] = Form([]), note: str = Form(""),
            back: str = Form("")) -> Response:
    def apply(admin: Admin) -> Done:
        if not ids:
            raise ConfigError("select at least one dead letter")
        done = admin.resolve(ids[:BULK_MAX], note=note.strip() or None)
        closed = sum(1 for r in done if r.resolved)
        return "resolved", {"n": closed, "skipped": len(done) - closed}

    return action(request, csrf, apply, back_to(back, "/dead-letters"))


@router.post("/dead-letters/matching")
def letters_matching(request: Request, csrf: str = Form(""), confirm: str = Form(""), start: str = Form(""),
                     act: str = Form("replay"), note: str = Form(""),
                     error_class: str = Form(""), stage: str = Form(""), task: str = Form(""),
                     owner: str = Form(""), older_than_h: str = Form(""), newer_than_h: str = Form("")) -> Response:
    """Every open dead letter the list's filter matches: first a page
    with the count to confirm, then the replay or the resolve
    (``Admin.replay_matching``, ``Admin.resolve_matching``)."""
    where = {"error_class": error_class, "stage": stage, "task": task, "owner": owner,
             "older_than_h": older_than_h, "newer_than_h": newer_than_h}
    chosen: dict[str, Any] = {"error_class": error_class or None, "stage": stage or None, "task": task or None,
                              "owner": owner or None}

    def ages() -> dict[str, Any]:
        return {"older_than": hours(older_than_h or None, "older than"),
                "newer_than": hours(newer_than_h or None, "newer than")}

    def replay_all(admin: Admin, dry_run: bool) -> Bulk:
        return admin.replay_matching(**chosen, **ages(), from_start=start == "1", dry_run=dry_run)

    def resolve_all(admin: Admin, dry_run: bool) -> Bulk:
        return admin.resolve_matching(**chosen, **ages(), note=note.strip() or None, dry_run=dry_run)

    if act == "resolve":
        return matching(request, csrf, confirm == "yes", resolve_all, act="resolve", where=where,
                        page="dead-letters", noun="open dead letter", done_code="resolved_matching")
    return matching(request, csrf, confirm == "yes", replay_all, act="replay", where=where, page="dead-letters",
                    noun="open dead letter", done_code="replayed_matching", extra={"start": start})


@router.post("/dead-letters/{letter_id}/notes")
def note(request: Request, letter_id: str, csrf: str = Form(""), text: str = Form("")) -> Response:
    def apply(admin: Admin) -> Done:
        if not text.strip():
            raise ConfigError("a note needs some text")
        admin.note(letter_id, text.strip())
        return "noted", {}

    return action(request, csrf, apply, f"/dead-letters/{letter_id}")
