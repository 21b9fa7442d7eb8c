"""The jobs list (filters, a search by id or key, pages), a job's page, and
the actions on jobs: retry, cancel, delete, the selected ones, every match."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
import json
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from redrive.admin import BULK_ACTIONS, Admin, Bulk
from redrive.core.states import Status
from redrive.errors import ConfigError, RedriveError
from redrive.http.dashboard.base import BULK_MAX, action, back_to, matching, number, page, when
from redrive.http.dashboard.render import SECURITY_HEADERS, Done, base_of
from redrive.store.reads import page_size
from redrive.views import dead_letter_view, event_view, job_view, progress_view

router = APIRouter(include_in_schema=False)


@router.get("/jobs")
def jobs(request: Request) -> Response:
    search = request.query_params.get("q", "")
    if search and len(search) == 36 and search.count("-") == 4:  # a job's id: straight to the job
        return RedirectResponse(f"{base_of(request)}/jobs/{search}", status_code=303, headers=SECURITY_HEADERS)
    return page(request, "jobs.html", "jobs", _listed)


def _listed(request: Request, admin: Admin) -> dict[str, Any]:
    q = request.query_params
    where = {k: q.get(k) or None for k in ("status", "task", "queue", "error_code", "owner", "q", "since", "until")}
    status = where["status"]
    if status is not None and status not in {s.value for s in Status}:
        raise ConfigError(f"no state named {status!r}")
    found = admin.jobs(status=Status(status) if status else None, task=where["task"], queue=where["queue"],
                       error_code=where["error_code"], owner=where["owner"], idempotency_key=where["q"],
                       created_after=when(where["since"], "since"), created_before=when(where["until"], "until"),
                       after=q.get("cursor"), limit=page_size(number(q.get("limit"), 50)))
    params = {k: v for k, v in where.items() if v}
    return {"title": "Jobs", "jobs": [job_view(j) for j in found], "where": where,
            "statuses": [s.value for s in Status], "next_cursor": found.next_cursor,
            "next_url": "?" + urlencode({**params, "cursor": found.next_cursor or ""})}


@router.get("/jobs/{job_id}")
def job(request: Request) -> Response:
    return page(request, "job.html", "jobs", _job)


def _job(request: Request, admin: Admin) -> dict[str, Any]:
    found = admin.job(request.path_params["job_id"])
    shown = job_view(found)
    # An operator sees the job's latest dead letter, linked, and its last stack (redacted)
    letters = (admin.dead_letters(job_id=found.id, limit=1).items
               if admin.actor.is_operator and found.status is Status.FAILED else [])
    return {"title": f"Job {found.id}", "job": shown,
            "letter": dead_letter_view(letters[0]) if letters else None,
            "args": json.dumps({"args": shown["args"], "kwargs": shown["kwargs"]}, indent=2),
            "result": json.dumps(shown["result"], indent=2),
            "progress": progress_view(admin.progress(found.id)),
            "events": [event_view(e) for e in admin.job_events(found.id)]}


@router.post("/jobs/{job_id}/retry")
def retry(request: Request, job_id: str, csrf: str = Form("")) -> Response:
    return action(request, csrf, lambda a: (a.retry(job_id), ("retried", {}))[1], f"/jobs/{job_id}")


@router.post("/jobs/{job_id}/cancel")
def cancel(request: Request, job_id: str, csrf: str = Form("")) -> Response:
    return action(request, csrf, lambda a: (a.cancel(job_id), ("cancel_asked", {}))[1], f"/jobs/{job_id}")


@router.post("/jobs/{job_id}/delete")
def delete(request: Request, job_id: str, csrf: str = Form("")) -> Response:
    def apply(admin: Admin) -> Done:
        admin.delete(job_id)
        return "deleted", {}

    return action(request, csrf, apply, "/jobs")


@router.post("/jobs/bulk")
def selected(request: Request, csrf: str = Form(""), act: str = Form(""), ids: list[str] = Form([]),
             back: str = Form("")) -> Response:
    def apply(admin: Admin) -> Done:
        if act not in ("retry", "cancel"):
            raise ConfigError("choose retry or cancel")
        if not ids:
            raise ConfigError("select at least one job")
        done = 0
        for job_id in ids[:BULK_MAX]:
            try:
                (admin.retry if act == "retry" else admin.cancel)(job_id)
                done += 1
            except RedriveError:  # not failed, ended, gone or another's: counted as not done
                pass
        return f"{act}_selected", {"n": done, "of": len(ids[:BULK_MAX])}

    return action(request, csrf, apply, back_to(back, "/jobs"))


@router.post("/jobs/matching")
def jobs_matching(request: Request, csrf: str = Form(""), act: str = Form(""), confirm: str = Form(""),
                  status: str = Form(""), task: str = Form(""), queue: str = Form(""),
                  error_code: str = Form(""), owner: str = Form(""), since: str = Form(""),
                  until: str = Form("")) -> Response:
    """Every job the list's filter matches: first a page with the count
    to confirm, then the action, in batches (``Admin.bulk``)."""
    where = {"status": status, "task": task, "queue": queue, "error_code": error_code, "owner": owner,
             "since": since, "until": until}

    def bulk(admin: Admin, dry_run: bool) -> Bulk:
        if act not in BULK_ACTIONS:
            raise ConfigError("choose retry, cancel or delete")
        if status and status not in {s.value for s in Status}:
            raise ConfigError(f"no state named {status!r}")
        return admin.bulk(act, dry_run=dry_run, status=Status(status) if status else None, task=task or None,
                          queue=queue or None, error_code=error_code or None, owner=owner or None,
                          created_after=when(since or None, "since"), created_before=when(until or None, "until"))

    return matching(request, csrf, confirm == "yes", bulk, act=act, where=where, page="jobs", noun="job",
                    done_code=f"{act}_matching")
