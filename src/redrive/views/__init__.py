"""What the CLI, the HTTP API and the dashboard show: one JSON-ready,
redacted dictionary per record, with the derived fields (a dead letter's
``state`` counts escalation; a breaker's failure rate and time open), so the
three surfaces cannot disagree.

What a job carries (arguments, result, stage outputs, error messages) passes
through redaction here; dead letters and outbox rows were redacted before
they were stored and are redacted again, since redaction may have learnt new
shapes since.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast
from uuid import UUID

from redrive.core.breaker import failure_percent, time_open
from redrive.core.job import DEAD_LETTER_COLUMNS, EVENT_COLUMNS, JOB_COLUMNS, DeadLetter, Job, JobEvent
from redrive.core.outbox import OutboxRow
from redrive.core.progress import Progress
from redrive.core.redact import redact
from redrive.core.rollups import Series, Window, quantile
from redrive.core.schedule import Schedule, last_firing, next_firing
from redrive.core.workflow import WorkflowState
from redrive.store.port import WORKER_STALE_AFTER_S, BreakerEvent
from redrive.store.reads import AuditEntry, DeadLetterFacets, MinuteCount, Page, QueueStats, ScheduleState, WorkerInfo
from redrive.views.shapes import (
    AuditShape,
    BreakerEventShape,
    BreakerShape,
    ChartsShape,
    DeadLetterShape,
    EventShape,
    FacetsShape,
    JobShape,
    MinuteShape,
    OutboxShape,
    ProgressShape,
    QueueShape,
    ReplacedShape,
    ScheduleShape,
    Timestamp,
    WorkerShape,
    WorkflowShape,
)

T = TypeVar("T")
JSONDict = dict[str, Any]

# Never shown: a lease token is a credential of the worker that holds the job.
_HIDDEN = frozenset({"lease_token"})
_PAYLOADS = ("args", "kwargs", "result", "checkpoint", "last_error_message", "error_message")


def plain(value: Any) -> Any:
    """Times as ISO 8601 and ids as text; everything else as it is."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    return value


def job_view(job: Job, *, reveal: bool = False) -> JobShape:
    """Redacted; with ``reveal`` (``Admin.reveal`` puts that on record) the
    arguments are shown as they were given, and everything else still redacted."""
    out = {name: plain(getattr(job, name)) for name in JOB_COLUMNS if name not in _HIDDEN}
    for name in _PAYLOADS:
        if not (reveal and name in ("args", "kwargs")):
            out[name] = redact(out[name])
    return out  # type: ignore[return-value]  # JOB_COLUMNS are JobShape's keys (tests/unit/test_views.py)


def progress_view(progress: Progress | None) -> ProgressShape | None:
    if progress is None:
        return None
    return {"fraction": progress.share, "done": progress.done, "total": progress.total, "note": progress.note,
            "at": plain(progress.at)}


def workflow_view(workflow: WorkflowState) -> WorkflowShape:
    return {"id": str(workflow.id), "name": workflow.name, "owner": workflow.owner, "key": workflow.key,
            "status": workflow.status.value, "created_at": plain(workflow.created_at),
            "cancelled_at": plain(workflow.cancelled_at), "cancelled_by": workflow.cancelled_by,
            "spawned_by": plain(workflow.spawned_by),
            "counts": {status.value: n for status, n in workflow.totals.items() if n},
            "progress": round(workflow.progress, 4),
            "steps": [{"name": name, "after": [{"step": p, "policy": policy} for p, policy in after],  # type: ignore[typeddict-item]
                       "counts": {s.value: n for s, n in workflow.counts.get(name, {}).items() if n}}
                      for name, after in workflow.graph.items()]}


def audit_view(entry: AuditEntry) -> AuditShape:
    return {"id": entry.id, "at": plain(entry.at), "by": entry.by, "action": entry.action,
            "job_id": plain(entry.job_id), "detail": redact(entry.detail)}


def event_view(event: JobEvent) -> EventShape:
    out = {name: plain(getattr(event, name)) for name in EVENT_COLUMNS}
    out["meta"] = redact(out["meta"])
    return out  # type: ignore[return-value]  # EVENT_COLUMNS are EventShape's keys


def dead_letter_state(letter: DeadLetter) -> str:
    """open, replayed, resolved, or escalated: open again after a replay
    failed the same way."""
    if letter.state != "open":
        return letter.state
    return "escalated" if letter.escalated else "open"


def dead_letter_view(letter: DeadLetter) -> DeadLetterShape:
    out = {name: plain(getattr(letter, name)) for name in DEAD_LETTER_COLUMNS}
    for name in ("error_message", "last_stack", "context", "notes"):
        out[name] = redact(out[name])
    out["state"] = dead_letter_state(letter)
    return out  # type: ignore[return-value]  # DEAD_LETTER_COLUMNS and state are DeadLetterShape's keys


def facets_view(facets: DeadLetterFacets) -> FacetsShape:
    return {"total": facets.total, "error_classes": facets.error_classes, "stages": facets.stages}


def breaker_view(status: Any) -> BreakerShape:
    """A ``BreakerStatus`` (redrive.admin) as shown."""
    b = status.breaker
    return {"name": status.name, "state": b.state.value, "forced": b.forced,
            "failure_percent": round(failure_percent(b.window), 1), "calls_in_window": len(b.window),
            "seconds_open": round(time_open(b, status.at), 3)}


def breaker_event_view(event: BreakerEvent) -> BreakerEventShape:
    return {"name": event.name, "at": plain(event.at), "from_state": event.from_state,
            "to_state": event.to_state, "reason": event.reason, "by": event.by}


def outbox_view(row: OutboxRow) -> OutboxShape:
    return {
        "key": redact(row.key), "status": row.status, "provider_id": row.provider_id,
        "notified_at": plain(row.notified_at), "job_id": str(row.job_id), "sends": row.sends,
        "reconciliations": row.reconciliations, "error_code": row.error_code,
        "error_message": redact(row.error_message), "created_at": plain(row.created_at),
        "updated_at": plain(row.updated_at),
    }


def queue_view(stats: QueueStats) -> QueueShape:
    return {"queue": stats.queue, "counts": {str(s): n for s, n in stats.counts.items()}, "estimated": stats.estimated,
            "at_least": stats.at_least,
            "oldest_due_age_s": None if stats.oldest_due_age_s is None else round(stats.oldest_due_age_s, 3),
            "paused": stats.paused_by is not None, "paused_by": stats.paused_by}


def minute_view(count: MinuteCount) -> MinuteShape:
    return {"queue": count.queue, "minute": plain(count.minute), "status": count.status.value,  # type: ignore[typeddict-item]
            "count": count.count}


def chart_view(found: list[Series], window: Window, now: datetime, by: str) -> ChartsShape:
    """Charts as the API answers them: per series its totals, its durations'
    and waits' p50 and p95 (ms, estimated from buckets), and each slot."""
    # (built by merging each slot's counts and percentiles: a cast, checked by the API's model)
    return cast(ChartsShape, {"window": window.name, "slot_seconds": int(window.slot.total_seconds()), "by": by,
            "start": plain(window.start(now)), "series": [{
                "key": one.key, "totals": one.totals(), **_percentiles(one.merged("durations"), one.merged("waits")),
                "slots": [{"start": plain(slot.start), **slot.counts, **_percentiles(slot.durations, slot.waits)}
                          for slot in one.slots]} for one in found]})


def _percentiles(durations: dict[int, int], waits: dict[int, int]) -> JSONDict:
    return {f"{name}_{label}_ms": _ms(quantile(buckets, q))
            for name, buckets in (("duration", durations), ("wait", waits))
            for label, q in (("p50", 0.5), ("p95", 0.95))}


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def schedule_view(state: ScheduleState | None, schedule: Schedule | None = None,
                  now: datetime | None = None) -> ScheduleShape:
    """How far a schedule fired (``state``: None when it never has); with its
    declaration and the store's time, also its task and cron, and per time
    zone the next firing and the key of the last one fired (none of them
    for a schedule the app no longer declares)."""
    name = state.name if state is not None else schedule.name if schedule is not None else None
    fired_until = state.fired_until if state is not None else None
    out: ScheduleShape = {"name": name or "", "fired_until": plain(fired_until),
                          "updated_at": plain(state.updated_at) if state is not None else None,
                          "paused_by": state.paused_by if state is not None else None,
                          "task": None, "cron": None, "zones": {}}
    if schedule is not None and now is not None:
        for tz in schedule.zones():
            upcoming = next_firing(schedule, tz, max(now, fired_until) if fired_until else now)
            fired = last_firing(schedule, tz, fired_until) if fired_until else None
            out["zones"][tz] = {"next_at": plain(upcoming.at) if upcoming else None,
                                "last_key": fired.key if fired else None}
        out["task"], out["cron"] = schedule.task, schedule.cron
    return out


def worker_view(worker: WorkerInfo, now: datetime) -> WorkerShape:
    """A registered worker; ``stale``: it missed three heartbeats (killed,
    or cut off). A supervisor (``kind``) runs no job itself: it says how
    many worker processes it has, how many it restarted and why."""
    silent = max(0.0, (now - worker.heartbeat_at).total_seconds())
    return {
        "id": worker.id, "kind": "supervisor" if worker.children is not None else "worker",
        "host": worker.host, "pid": worker.pid, "queues": list(worker.queues),
        "concurrency": worker.concurrency, "version": worker.version, "running": worker.running,
        "jobs_run": worker.jobs_run, "memory_bytes": worker.memory_bytes, "orphaned": worker.orphaned,
        "supervisor": worker.supervisor, "children": worker.children, "restarts": worker.restarts,
        "restarts_by": {str(k): int(v) for k, v in worker.restarts_by.items()},
        "replaced": [_replaced(r) for r in worker.replaced],
        "started_at": plain(worker.started_at), "heartbeat_at": plain(worker.heartbeat_at),
        "seconds_since_heartbeat": round(silent, 3), "stale": silent > WORKER_STALE_AFTER_S}


def _replaced(entry: Any) -> ReplacedShape:
    """One replacement as a supervisor reported it (a registry entry may come
    from another version: what it lacks is shown empty)."""
    return {"pid": int(entry.get("pid") or 0), "worker": str(entry.get("worker") or ""),
            "why": str(entry.get("why") or ""), "reason": str(entry.get("reason") or ""), "at": Timestamp(str(at)) if (at := entry.get("at")) else None}


def workers_view(workers: Sequence[WorkerInfo], now: datetime) -> list[WorkerShape]:
    """Every registered worker, each supervisor followed by its worker processes."""
    views = [worker_view(w, now) for w in workers]
    supervisors = {v["id"] for v in views if v["kind"] == "supervisor"}
    ordered: list[WorkerShape] = []
    for view in views:
        if view["supervisor"] in supervisors:
            continue  # listed under its supervisor
        ordered.append(view)
        if view["kind"] == "supervisor":
            ordered += [v for v in views if v["supervisor"] == view["id"]]
    return ordered


def page_view(page: Page[T], view: Callable[[T], Mapping[str, Any]]) -> JSONDict:
    return {"items": [view(item) for item in page], "next_cursor": page.next_cursor, "more": page.more}
