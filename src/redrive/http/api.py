"""The JSON API under /api/v1: what a principal may see and do, through the
same ``Client``, ``Admin`` and views as the CLI. Every route is a plain
function: store calls block, and FastAPI runs them on its threads."""

# No ``from __future__ import annotations``: FastAPI reads the routes'
# annotations, and ``Depends(actor)`` names a function local to ``routes``.
import uuid
from collections.abc import Callable, Coroutine, Mapping
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.dependencies.models import Dependant
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer

from redrive.admin import Actor, Admin
from redrive.app import App
from redrive.client import JobRequest
from redrive.core.outbox import OutboxStatus
from redrive.core.states import Status
from redrive.errors import ConfigError, Forbidden, RedriveError, UnknownDependency
from redrive.http import responses as out
from redrive.http.auth import Auth
from redrive.http.errors import BatchTooLarge, Unauthorized, error
from redrive.http.models import (
    MAX_AGE_S,
    MAX_BATCH,
    BatchBody,
    BulkBody,
    EnqueueBody,
    LetterBulkBody,
    NoteBody,
    ReplayBody,
    ResolveBody,
    Strict,
)
from redrive.http.throttle import Throttle
from redrive.store.reads import page_size
from redrive.views import (
    audit_view,
    breaker_event_view,
    breaker_view,
    chart_view,
    dead_letter_view,
    event_view,
    facets_view,
    job_view,
    minute_view,
    outbox_view,
    page_view,
    queue_view,
    schedule_view,
    workers_view,
)

JSON = Mapping[str, Any]
_BEARER = HTTPBearer(auto_error=False, bearerFormat="redrive API token",
                     description="A token from REDRIVE_API_TOKENS: `Authorization: Bearer <token>`")


def routes(app: App, auth: Auth, throttle: Throttle) -> APIRouter:
    def actor(request: Request, _: Annotated[Any, Security(_BEARER)] = None) -> Actor:
        # _BEARER only declares the scheme in the OpenAPI document (Swagger's
        # Authorize button, generated clients); ``auth`` reads the request.
        if (known := getattr(request.state, "redrive_actor", None)) is not None:
            return known  # settled by the route before its body was read: counted once
        found = auth(request)
        # A caller without a valid token is counted by its address: guessing
        # tokens is throttled too.
        throttle.check(found.name if found is not None
                       else f"anonymous@{request.client.host if request.client else '?'}")
        if found is None:
            raise Unauthorized("send a valid API token in the Authorization header")
        return found

    def admin(who: Annotated[Actor, Depends(actor)]) -> Admin:
        return app.admin(who)

    def operator(who: Annotated[Actor, Depends(actor)]) -> Admin:
        """Operator-only routes say so before they look at the request (Admin checks again)."""
        if not who.is_operator:
            raise Forbidden("only an operator may do this")
        return app.admin(who)

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

    router = APIRouter(prefix="/api/v1", route_class=CallerFirst)

    # -- jobs ------------------------------------------------------------------

    @router.post("/jobs", status_code=201, response_model=out.Job, tags=["jobs"])
    def enqueue(body: EnqueueBody, response: Response, who: Annotated[Actor, Depends(actor)],
                idempotency_key: Annotated[str | None, Header(max_length=255)] = None) -> JSON:
        """Enqueue a job for the caller. With an ``Idempotency-Key`` header the
        same key (per owner) returns the existing job: 200, not 201."""
        (done,) = app.client.enqueue_many([_request(body, who, idempotency_key)])
        if done.duplicate:
            response.status_code = 200
        return job_view(done.job)

    @router.post("/jobs/batch", status_code=201, response_model=out.Batch, tags=["jobs"])
    def enqueue_batch(body: BatchBody, who: Annotated[Actor, Depends(actor)]) -> JSON:
        """Enqueue up to 1,000 jobs in one transaction: all of them, or none
        when any is refused. Each may carry its own ``idempotency_key``."""
        if len(body.jobs) > MAX_BATCH:
            raise BatchTooLarge(f"a batch holds at most {MAX_BATCH} jobs, not {len(body.jobs)}")
        requests = [_request(item, who, item.idempotency_key) for item in body.jobs]
        done = app.client.enqueue_many(requests)
        return {"items": [{**job_view(r.job), "duplicate": r.duplicate} for r in done]}

    @router.post("/jobs/bulk", response_model=out.Bulk, tags=["jobs"])
    def bulk(body: BulkBody, ops: Annotated[Admin, Depends(admin)]) -> JSON:
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

    @router.get("/jobs", response_model=out.paged(out.Job), tags=["jobs"])
    def jobs(
        ops: Annotated[Admin, Depends(admin)],
        status: Annotated[list[Status] | None, Query()] = None,
        task: str | None = None, queue: str | None = None, error_code: str | None = None,
        owner: str | None = None, idempotency_key: str | None = None,
        created_after: datetime | None = None, created_before: datetime | None = None,
        cursor: str | None = None, limit: Annotated[int, Query(ge=1)] = 50,
    ) -> JSON:
        """Newest first, a page at a time (``cursor``: the last page's
        ``next_cursor``; ``limit`` is clamped). An owner sees their own jobs."""
        page = ops.jobs(status=status, task=task, queue=queue, error_code=error_code, owner=owner,
                        idempotency_key=idempotency_key, created_after=created_after,
                        created_before=created_before, after=cursor, limit=page_size(limit))
        return page_view(page, job_view)

    @router.get("/jobs/{job_id}", response_model=out.JobWithEvents, tags=["jobs"])
    def job(job_id: str, ops: Annotated[Admin, Depends(admin)]) -> JSON:
        """The job and its events, oldest first."""
        found = ops.job(job_id)
        return {**job_view(found), "events": [event_view(e) for e in ops.job_events(found.id)]}

    @router.post("/jobs/{job_id}/retry", response_model=out.Job, tags=["jobs"])
    def retry(job_id: str, ops: Annotated[Admin, Depends(admin)], body: Strict | None = None) -> JSON:
        """A failed job runs again, at the stage that failed; 409 otherwise."""
        return job_view(ops.retry(job_id))

    @router.delete("/jobs/{job_id}", status_code=204, response_class=Response, tags=["jobs"],
                   responses={204: {"description": "deleted"}})
    def delete(job_id: str, ops: Annotated[Admin, Depends(admin)]) -> Response:
        """A finished job goes now, with its events, dead letters and keys
        (409 while it can still run: cancel it first). On the audit trail."""
        ops.delete(job_id)
        return Response(status_code=204)

    @router.post("/jobs/{job_id}/reveal", response_model=out.Job, tags=["jobs"])
    def reveal(job_id: str, ops: Annotated[Admin, Depends(operator)], body: Strict | None = None) -> JSON:
        """The job with its original arguments, unredacted (the rest stays
        redacted): operators only, and put on its audit trail with who looked,
        as ``redrive jobs show --reveal`` does. A POST: looking is an action."""
        return job_view(ops.reveal(job_id), reveal=True)

    @router.post("/jobs/{job_id}/cancel", response_model=out.Job, tags=["jobs"])
    def cancel(job_id: str, ops: Annotated[Admin, Depends(admin)], body: Strict | None = None) -> JSON:
        """A scheduled or queued job ends cancelled now; a running one is
        stopped by its worker within a second or so (it is still running in
        this answer)."""
        return job_view(ops.cancel(job_id))

    # -- dead letters (operators) ------------------------------------------------

    def letter_filters(
        error_class: str | None = None, stage: str | None = None, task: str | None = None,
        owner: str | None = None, state: Literal["open", "replayed", "resolved", "escalated"] | None = None,
        older_than_s: Annotated[float | None, Query(ge=0, le=MAX_AGE_S)] = None,
        newer_than_s: Annotated[float | None, Query(ge=0, le=MAX_AGE_S)] = None,
    ) -> dict[str, Any]:
        return {"error_class": error_class, "stage": stage, "task": task, "owner": owner, "state": state,
                "older_than": None if older_than_s is None else timedelta(seconds=older_than_s),
                "newer_than": None if newer_than_s is None else timedelta(seconds=newer_than_s)}

    @router.get("/dead-letters", response_model=out.paged(out.DeadLetter), tags=["dead letters"])
    def dead_letters(ops: Annotated[Admin, Depends(operator)],
                     where: Annotated[dict[str, Any], Depends(letter_filters)],
                     cursor: str | None = None, limit: Annotated[int, Query(ge=1)] = 50) -> JSON:
        """Newest first, with the CLI's filters; age is from the last failure."""
        return page_view(ops.dead_letters(**where, after=cursor, limit=page_size(limit)), dead_letter_view)

    @router.get("/dead-letters/facets", response_model=out.Facets, tags=["dead letters"])
    def dead_letter_facets(ops: Annotated[Admin, Depends(operator)],
                           where: Annotated[dict[str, Any], Depends(letter_filters)]) -> JSON:
        """How many match, by error class and by stage."""
        return facets_view(ops.dead_letter_facets(**where))

    @router.get("/dead-letters/{letter_id}", response_model=out.DeadLetter, tags=["dead letters"])
    def dead_letter(letter_id: int, ops: Annotated[Admin, Depends(operator)]) -> JSON:
        return dead_letter_view(ops.dead_letter(letter_id))

    @router.post("/dead-letters/{letter_id}/notes", response_model=out.DeadLetter, tags=["dead letters"])
    def note(letter_id: int, body: NoteBody, ops: Annotated[Admin, Depends(operator)]) -> JSON:
        """Add a resolution note, signed by the caller."""
        return dead_letter_view(ops.note(letter_id, body.text))

    @router.post("/dead-letters/bulk", response_model=out.Bulk, tags=["dead letters"])
    def letters_matching(body: LetterBulkBody, ops: Annotated[Admin, Depends(operator)]) -> JSON:
        """Replay or resolve every open dead letter the filter matches, in
        batches. Interrupted, the same call again does the rest. One audit
        entry with the filter and the count; with ``dry_run`` only the count."""
        chosen = body.filter
        where: dict[str, Any] = {"error_class": chosen.error_class, "stage": chosen.stage, "task": chosen.task,
                 "owner": chosen.owner,
                 "older_than": None if chosen.older_than_s is None else timedelta(seconds=chosen.older_than_s),
                 "newer_than": None if chosen.newer_than_s is None else timedelta(seconds=chosen.newer_than_s)}
        if body.action == "resolve":
            if body.from_start:
                raise ConfigError("from_start is for a replay; a resolve runs nothing")
            done = ops.resolve_matching(**where, note=body.note, dry_run=body.dry_run)
        else:
            if body.note is not None:
                raise ConfigError("a note goes with a resolve; to annotate, post to the letter's notes")
            done = ops.replay_matching(**where, from_start=body.from_start, dry_run=body.dry_run)
        return {"action": done.action, "matched": done.matched, "done": done.done, "skipped": done.skipped,
                "dry_run": done.dry_run}

    @router.post("/dead-letters/replay", response_model=out.Replays, tags=["dead letters"])
    def replay(body: ReplayBody, ops: Annotated[Admin, Depends(operator)]) -> JSON:
        """Run the letters' jobs again from the failed stage (or from the
        start); a letter replayed already is left alone (``job`` null)."""
        done = ops.replay(body.ids, from_start=body.from_start)
        return {"items": [{"dead_letter": dead_letter_view(r.letter),
                           "job": job_view(r.job) if r.job is not None else None} for r in done]}

    @router.post("/dead-letters/resolve", response_model=out.DeadLetters, tags=["dead letters"])
    def resolve(body: ResolveBody, ops: Annotated[Admin, Depends(operator)]) -> JSON:
        """Close open letters without running their jobs again, with an
        optional note saying why; they leave the open count and their jobs
        may be pruned. A letter replayed or resolved already is left as it
        is (its ``state`` says which)."""
        return {"items": [dead_letter_view(r.letter) for r in ops.resolve(body.ids, note=body.note)]}

    # -- breakers, queues, schedules, outbox (operators) -------------------------------

    @router.get("/breakers", response_model=out.Breakers, tags=["breakers"])
    def breakers(ops: Annotated[Admin, Depends(operator)]) -> JSON:
        """Each dependency's breaker: state, failure rate in its window, time open."""
        return {"items": [breaker_view(b) for b in ops.breakers().values()]}

    @router.get("/breakers/{name}", response_model=out.BreakerWithHistory, tags=["breakers"])
    def breaker(name: str, ops: Annotated[Admin, Depends(operator)]) -> JSON:
        """One breaker, with its state changes, oldest first."""
        found = ops.breakers().get(name)
        if found is None:
            raise UnknownDependency(f"no breaker named {name!r}")
        return {**breaker_view(found), "history": [breaker_event_view(e) for e in ops.breaker_history(name)]}

    @router.post("/breakers/{name}/open", response_model=out.Breaker, tags=["breakers"])
    def open_breaker(name: str, ops: Annotated[Admin, Depends(operator)], body: Strict | None = None) -> JSON:
        """Force it open until it is closed by hand."""
        return breaker_view(ops.open_breaker(name))

    @router.post("/breakers/{name}/close", response_model=out.Breaker, tags=["breakers"])
    def close_breaker(name: str, ops: Annotated[Admin, Depends(operator)], body: Strict | None = None) -> JSON:
        """Close it with a fresh window."""
        return breaker_view(ops.close_breaker(name))

    @router.get("/queues", response_model=out.Queues, tags=["queues"])
    def queues(ops: Annotated[Admin, Depends(operator)]) -> JSON:
        """Per queue: active jobs by state, the oldest due job's wait, paused or not."""
        return {"items": [queue_view(q) for q in ops.queues()]}

    @router.get("/queues/throughput", response_model=out.Throughput, tags=["queues"])
    def throughput(ops: Annotated[Admin, Depends(operator)],
                   minutes: Annotated[int, Query(ge=1, le=1440)] = 60) -> JSON:
        """Jobs that ended per queue, minute and outcome over the last ``minutes``
        (minutes older than two hours come folded into their hour's first)."""
        return {"items": [minute_view(c) for c in ops.finished_per_minute(minutes)]}

    @router.get("/charts", response_model=out.Charts, tags=["queues"])
    def charts(ops: Annotated[Admin, Depends(operator)],
               window: Annotated[Literal["1h", "24h", "7d"], Query()] = "1h",
               by: Annotated[Literal["queue", "task"], Query()] = "queue") -> JSON:
        """Attempts ended per slot (a minute, an hour or six) by how they
        ended, with duration and queue-wait percentiles, per queue or per
        task: from the rollups, so they outlive pruned history."""
        found, chosen, now = ops.charts(window, by=by)
        return chart_view(found, chosen, now, by)

    @router.post("/queues/{queue}/pause", response_model=out.QueueChange, tags=["queues"])
    def pause(queue: str, ops: Annotated[Admin, Depends(operator)], body: Strict | None = None) -> JSON:
        """No worker starts the queue's jobs until it is resumed; running ones go on."""
        return {"queue": queue, "changed": ops.pause_queue(queue)}

    @router.post("/queues/{queue}/resume", response_model=out.QueueChange, tags=["queues"])
    def resume(queue: str, ops: Annotated[Admin, Depends(operator)], body: Strict | None = None) -> JSON:
        return {"queue": queue, "changed": ops.resume_queue(queue)}

    @router.get("/audit", response_model=out.Audit, tags=["audit"])
    def audit(ops: Annotated[Admin, Depends(operator)]) -> JSON:
        """What operators did to no one job (queue pauses and resumes, bulk
        actions with their filter and count), the latest 1,000, oldest first."""
        return {"items": [audit_view(entry) for entry in ops.audit_trail()]}

    @router.get("/workers", response_model=out.Workers, tags=["workers"])
    def workers(ops: Annotated[Admin, Depends(operator)]) -> JSON:
        """Every registered worker, oldest first; ``stale``: it missed three heartbeats."""
        found, now = ops.workers()
        return {"items": workers_view(found, now)}

    @router.get("/schedules", response_model=out.Schedules, tags=["schedules"])
    def schedules(ops: Annotated[Admin, Depends(operator)]) -> JSON:
        """Each schedule: how far it fired, and per time zone the next firing
        and the key of the last one."""
        states = {s.name: s for s in ops.schedules()}
        declared = app.registry.schedules
        now = app.store.now()
        return {"items": [schedule_view(states.get(name), declared.get(name), now)
                          for name in sorted(set(states) | set(declared))]}

    @router.post("/schedules/{name}/pause", response_model=out.ScheduleChange, tags=["schedules"])
    def pause_schedule(name: str, ops: Annotated[Admin, Depends(operator)], body: Strict | None = None) -> JSON:
        """Schedulers skip its firings until it is resumed; skipped ones are not caught up."""
        return {"schedule": name, "changed": ops.pause_schedule(name)}

    @router.post("/schedules/{name}/resume", response_model=out.ScheduleChange, tags=["schedules"])
    def resume_schedule(name: str, ops: Annotated[Admin, Depends(operator)], body: Strict | None = None) -> JSON:
        return {"schedule": name, "changed": ops.resume_schedule(name)}

    @router.post("/schedules/{name}/run", response_model=out.ScheduleRun, tags=["schedules"])
    def run_schedule(name: str, ops: Annotated[Admin, Depends(operator)], body: Strict | None = None,
                     idempotency_key: Annotated[str | None, Header(max_length=64)] = None) -> JSON:
        """Fire it now, one job per time zone (and entity). With an
        ``Idempotency-Key`` header the same key fires once; without, each
        call fires anew."""
        made = ops.run_schedule(name, run=idempotency_key or uuid.uuid4().hex)
        return {"schedule": name, "created": sum(not r.duplicate for r in made),
                "items": [{**job_view(r.job), "duplicate": r.duplicate} for r in made]}

    @router.get("/outbox", response_model=out.paged(out.OutboxRow), tags=["outbox"])
    def outbox(ops: Annotated[Admin, Depends(operator)],
               status: OutboxStatus | None = None,
               job_id: str | None = None, cursor: str | None = None,
               limit: Annotated[int, Query(ge=1)] = 50) -> JSON:
        """Outbox rows, oldest first; ``status=failed`` lists what awaits an operator."""
        return page_view(ops.outbox(status=status, job_id=job_id, after=cursor, limit=page_size(limit)),
                         outbox_view)

    root = APIRouter(responses=out.ERRORS)
    root.include_router(router)
    try:
        from redrive.metrics import CONTENT_TYPE, Metrics
    except ConfigError:  # no metrics extra: no /metrics
        return root
    metrics = Metrics(app)

    # Errors stay JSON: only the answer itself is Prometheus' text format.
    @root.get("/metrics", tags=["metrics"], response_model=None,
              responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}})
    def metrics_text(ops: Annotated[Admin, Depends(operator)]) -> Response:
        """Prometheus metrics (docs/observability.md); scrape with an operator token."""
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    return root


def health(app: App) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz", response_model=out.Health, tags=["health"])
    def healthz() -> JSON:
        """The process answers."""
        return {"status": "ok"}

    @router.get("/readyz", tags=["health"], response_model=out.Health, responses={503: out.ERRORS[503]})
    def readyz() -> JSON | JSONResponse:
        """The store answers and its schema is current."""
        try:
            if not app.store.schema_current():
                return error(503, "SCHEMA_OUTDATED", "migrations are pending: run `redrive migrate`")
        except RedriveError as exc:
            return error(503, exc.code, exc.message)
        return {"status": "ready"}

    return router


def _depends_on(dependant: Dependant, fn: Callable[..., Any]) -> bool:
    return any(d.call is fn or _depends_on(d, fn) for d in dependant.dependencies)


def _has_body(request: Request) -> bool:
    return request.headers.get("content-length", "") not in ("", "0") or "transfer-encoding" in request.headers


def _media(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _request(body: EnqueueBody, who: Actor, idempotency_key: str | None) -> JobRequest:
    """A job for the caller: its owner is whoever asks, never the body's."""
    if who.read_only:
        raise Forbidden("a read-only operator may not enqueue jobs")
    if body.run_at is not None and body.delay_s is not None:
        raise _invalid("give run_at or delay_s, not both")
    return JobRequest(
        body.task, args=body.args, kwargs=body.kwargs, queue=body.queue, priority=body.priority,
        run_at=body.run_at, delay=None if body.delay_s is None else timedelta(seconds=body.delay_s),
        owner=who.owner, max_attempts=body.max_attempts, idempotency_key=idempotency_key,
        version=body.version, dedupe=body.dedupe,
    )


def _invalid(message: str) -> RedriveError:
    return ConfigError(message)

