"""``/api/v1/jobs``: enqueue (one, or a batch in one transaction), list,
read, retry, cancel, reveal, delete, and act on every job a filter matches."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
from datetime import datetime, timedelta
from typing import Annotated

from fastapi import Header, Query, Request, Response

from redrive.admin import Actor
from redrive.client import JobRequest
from redrive.core.states import Status
from redrive.errors import ConfigError, Forbidden
from redrive.http import responses as out
from redrive.http.api.callers import Acting, Answer, Caller, Operator, resource
from redrive.http.errors import BatchTooLarge
from redrive.http.models import MAX_BATCH, BatchBody, BulkBody, EnqueueBody, Strict
from redrive.http.surface import surface
from redrive.store.reads import page_size
from redrive.views import event_view, job_view, page_view, progress_view

router = resource("jobs")


@router.post("/jobs", status_code=201, response_model=out.Job)
def enqueue(request: Request, body: EnqueueBody, response: Response, who: Caller,
            idempotency_key: Annotated[str | None, Header(max_length=255)] = None) -> Answer:
    """Enqueue a job for the caller. With an ``Idempotency-Key`` header the
    same key (per owner) returns the existing job: 200, not 201."""
    (done,) = surface(request).app.client.enqueue_many([_request(body, who, idempotency_key)])
    if done.duplicate:
        response.status_code = 200
    return job_view(done.job)


@router.post("/jobs/batch", status_code=201, response_model=out.Batch)
def enqueue_batch(request: Request, body: BatchBody, who: Caller) -> Answer:
    """Enqueue up to 1,000 jobs in one transaction: all of them, or none
    when any is refused. Each may carry its own ``idempotency_key``."""
    if len(body.jobs) > MAX_BATCH:
        raise BatchTooLarge(f"a batch holds at most {MAX_BATCH} jobs, not {len(body.jobs)}")
    requests = [_request(item, who, item.idempotency_key) for item in body.jobs]
    done = surface(request).app.client.enqueue_many(requests)
    return {"items": [{**job_view(r.job), "duplicate": r.duplicate} for r in done]}


@router.post("/jobs/bulk", response_model=out.Bulk)
def bulk(body: BulkBody, ops: Acting) -> Answer:
    """Retry, cancel or delete every job the filter matches, in batches: an owner
    acts on their own jobs only. Interrupted, the same call again does
    the rest. One audit entry with the filter and the count; with
    ``dry_run`` only the count."""
    chosen = body.filter
    done = ops.bulk(body.action, dry_run=body.dry_run, status=chosen.status, task=chosen.task,
                    queue=chosen.queue, owner=chosen.owner, error_code=chosen.error_code,
                    created_after=chosen.created_after, created_before=chosen.created_before)
    return {"action": done.action, "matched": done.matched, "done": done.done, "skipped": done.skipped,
            "dry_run": done.dry_run}


@router.get("/jobs", response_model=out.paged(out.Job))
def jobs(
    ops: Acting,
    status: Annotated[list[Status] | None, Query()] = None,
    task: str | None = None, queue: str | None = None, error_code: str | None = None,
    owner: str | None = None, idempotency_key: str | None = None,
    created_after: datetime | None = None, created_before: datetime | None = None,
    cursor: str | None = None, limit: Annotated[int, Query(ge=1)] = 50,
) -> Answer:
    """Newest first, a page at a time (``cursor``: the last page's
    ``next_cursor``; ``limit`` is clamped). An owner sees their own jobs."""
    page = ops.jobs(status=status, task=task, queue=queue, error_code=error_code, owner=owner,
                    idempotency_key=idempotency_key, created_after=created_after,
                    created_before=created_before, after=cursor, limit=page_size(limit))
    return page_view(page, job_view)


@router.get("/jobs/{job_id}", response_model=out.JobWithEvents)
def job(job_id: str, ops: Acting) -> Answer:
    """The job and its events, oldest first."""
    found = ops.job(job_id)
    return {**job_view(found), "progress": progress_view(ops.progress(found.id)),
            "events": [event_view(e) for e in ops.job_events(found.id)]}


@router.post("/jobs/{job_id}/retry", response_model=out.Job)
def retry(job_id: str, ops: Acting, body: Strict | None = None) -> Answer:
    """A failed job runs again, at the stage that failed; 409 otherwise."""
    return job_view(ops.retry(job_id))


@router.delete("/jobs/{job_id}", status_code=204, response_class=Response, responses={204: {"description": "deleted"}})
def delete(job_id: str, ops: Acting) -> Response:
    """A finished job goes now, with its events, dead letters and keys
    (409 while it can still run: cancel it first). On the audit trail."""
    ops.delete(job_id)
    return Response(status_code=204)


@router.post("/jobs/{job_id}/reveal", response_model=out.Job)
def reveal(job_id: str, ops: Operator, body: Strict | None = None) -> Answer:
    """The job with its original arguments, unredacted (the rest stays
    redacted): operators only, and put on its audit trail with who looked,
    as ``redrive jobs show --reveal`` does. A POST: looking is an action."""
    return job_view(ops.reveal(job_id), reveal=True)


@router.post("/jobs/{job_id}/cancel", response_model=out.Job)
def cancel(job_id: str, ops: Acting, body: Strict | None = None) -> Answer:
    """A scheduled or queued job ends cancelled now; a running one is
    stopped by its worker within a second or so (it is still running in
    this answer)."""
    return job_view(ops.cancel(job_id))


def _request(body: EnqueueBody, who: Actor, idempotency_key: str | None) -> JobRequest:
    """A job for the caller: its owner is whoever asks, never the body's."""
    if who.read_only:
        raise Forbidden("a read-only operator may not enqueue jobs")
    if body.run_at is not None and body.delay_s is not None:
        raise ConfigError("give run_at or delay_s, not both")
    return JobRequest(
        body.task, args=body.args, kwargs=body.kwargs, queue=body.queue, priority=body.priority,
        run_at=body.run_at, delay=None if body.delay_s is None else timedelta(seconds=body.delay_s),
        owner=who.owner, max_attempts=body.max_attempts, idempotency_key=idempotency_key,
        version=body.version, dedupe=body.dedupe,
    )
