"""What the API answers, field by field: the allowlist of what may leave the
server. Each route's answer is checked against its model before it is sent,
and every model forbids fields it does not name, so a field added to a view
(or a lease token let through) fails the request and the tests rather than
reaching a client. The OpenAPI document carries the same schemas, with
``additionalProperties: false``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from redrive.core.breaker import State
from redrive.core.outbox import OutboxStatus
from redrive.core.states import Status


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


T = TypeVar("T")


class Page(Closed, Generic[T]):
    """Newest first (the outbox: oldest first); pass ``next_cursor`` back as ``cursor``."""

    items: list[T]
    next_cursor: str | None
    more: bool


class Job(Closed):
    id: str
    task: str
    queue: str
    args: list[Any] = Field(description="redacted")
    kwargs: dict[str, Any] = Field(description="redacted")
    status: Status
    priority: int
    run_at: datetime
    attempts: int
    max_attempts: int
    owner: str | None
    lease_owner: str | None = Field(description="the worker running it")
    lease_expires_at: datetime | None
    last_error_code: str | None
    last_error_message: str | None
    error_code: str | None
    error_message: str | None
    result: Any = Field(description="redacted")
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    failed_at: datetime | None
    stage: str | None = Field(description="where a retry or replay resumes")
    stage_attempts: dict[str, int]
    checkpoint: dict[str, Any] = Field(description="each finished stage's output, redacted")
    manual_retry_count: int
    first_failed_at: datetime | None
    dependencies: list[str]
    idempotency_key: str | None
    version: int


class Event(Closed):
    id: int
    job_id: str
    at: datetime
    from_status: Status | None
    to_status: Status
    attempt: int
    meta: dict[str, Any] = Field(description="redacted: stage, duration, error code, who acted")


class JobWithEvents(Job):
    events: list[Event] = Field(description="oldest first")


class Enqueued(Job):
    duplicate: bool = Field(description="an earlier enqueue with the same key made this job")


class Batch(Closed):
    items: list[Enqueued]


class DeadLetter(Closed):
    id: int
    job_id: str
    task: str
    queue: str
    owner: str | None
    error_class: str
    error_code: str
    error_message: str
    retryable: bool
    stage: str | None
    stage_attempts: dict[str, int]
    attempts: int
    last_stack: str | None
    context: dict[str, Any]
    first_failure_at: datetime
    last_failure_at: datetime
    escalated: bool
    previous_id: int | None
    replayed_at: datetime | None
    replayed_by: str | None
    replay_from: Literal["stage", "start"] | None
    resolved_at: datetime | None
    resolved_by: str | None
    notes: list[dict[str, Any]]
    state: Literal["open", "replayed", "resolved", "escalated"]


class Facets(Closed):
    total: int
    error_classes: dict[str, int]
    stages: dict[str, int] = Field(description='"" counts letters without a stage')


class Replayed(Closed):
    dead_letter: DeadLetter
    job: Job | None = Field(description="null: the letter was replayed already")


class Replays(Closed):
    items: list[Replayed]


class DeadLetters(Closed):
    items: list[DeadLetter]


class Bulk(Closed):
    action: str
    matched: int = Field(description="jobs the filter matched, of those the action applies to")
    done: int = Field(description="jobs acted on (0 on a dry run)")
    skipped: int = Field(description="jobs someone else changed meanwhile")
    dry_run: bool


class Breaker(Closed):
    name: str
    state: State
    forced: bool
    failure_percent: float
    calls_in_window: int
    seconds_open: float


class BreakerEvent(Closed):
    name: str
    at: datetime
    from_state: str
    to_state: str
    reason: str
    by: str | None


class BreakerWithHistory(Breaker):
    history: list[BreakerEvent] = Field(description="oldest first")


class Breakers(Closed):
    items: list[Breaker]


class Queue(Closed):
    queue: str
    counts: dict[str, int] = Field(description="active jobs by state")
    estimated: bool = Field(description="true: a waiting count past 1,000 is the database's estimate (PostgreSQL)")
    at_least: bool = Field(description="true: a waiting count is 10,000, counted no further: at least that many (SQLite)")
    oldest_due_age_s: float | None
    paused: bool
    paused_by: str | None


class Queues(Closed):
    items: list[Queue]


class MinuteCount(Closed):
    queue: str
    minute: datetime = Field(description="the minute's start, UTC")
    status: Literal["succeeded", "failed", "cancelled"]
    count: int


class Throughput(Closed):
    items: list[MinuteCount] = Field(description="oldest minute first; minutes with no ended job are left out")


class _Timing(Closed):
    duration_p50_ms: float | None = Field(description="estimated from duration buckets; null: nothing timed")
    duration_p95_ms: float | None
    wait_p50_ms: float | None = Field(description="from due to started, estimated from wait buckets")
    wait_p95_ms: float | None


class ChartSlot(_Timing):
    start: datetime
    succeeded: int
    failed: int = Field(description="failed for good")
    retried: int = Field(description="attempts that failed and were retried")
    cancelled: int = Field(description="cancelled while running")


class Endings(Closed):
    succeeded: int
    failed: int
    retried: int
    cancelled: int


class ChartSeries(_Timing):
    key: str = Field(description="the queue or the task")
    totals: Endings
    slots: list[ChartSlot] = Field(description="oldest first, every slot of the window")


class Charts(Closed):
    window: Literal["1h", "24h", "7d"]
    slot_seconds: int
    by: Literal["queue", "task"]
    start: datetime = Field(description="the first slot's start, UTC")
    series: list[ChartSeries] = Field(description="by key; keys with nothing in the window are left out")


class QueueChange(Closed):
    queue: str
    changed: bool = Field(description="false: it was paused (or running) already")


class Worker(Closed):
    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    version: str
    running: int = Field(description="jobs it runs now")
    started_at: datetime
    heartbeat_at: datetime
    seconds_since_heartbeat: float
    stale: bool = Field(description="it missed three heartbeats: killed, or cut off from the store")


class Workers(Closed):
    items: list[Worker]


class Zone(Closed):
    next_at: datetime | None
    last_key: str | None


class Schedule(Closed):
    name: str
    fired_until: datetime | None
    updated_at: datetime | None
    paused_by: str | None = Field(default=None, description="who paused it; null: it fires")
    task: str | None = Field(default=None, description="null: no longer declared by the app")
    cron: str | None = None
    zones: dict[str, Zone] = Field(default_factory=dict)


class Schedules(Closed):
    items: list[Schedule]


class OutboxRow(Closed):
    key: str
    status: OutboxStatus
    provider_id: str | None
    notified_at: datetime | None
    job_id: str
    sends: int
    reconciliations: int
    error_code: str | None
    error_message: str | None
    created_at: datetime
    updated_at: datetime


class Health(Closed):
    status: Literal["ok", "ready"]


class ErrorDetail(Closed):
    code: str = Field(description="one of redrive's error codes, e.g. FORBIDDEN, STORE_UNAVAILABLE")
    message: str = Field(description="one line")


class Error(Closed):
    error: ErrorDetail


# Every route may answer these; each one's body is an ``Error``.
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": Error, "description": text}
    for status, text in {
        400: "bad request", 401: "no valid token", 403: "not the caller's to see or do",
        404: "no such object", 409: "not in a state that allows it", 413: "body too large",
        415: "not JSON", 422: "invalid request", 429: "too many requests: see Retry-After",
        503: "the store is unavailable",
    }.items()
}


class AuditEntry(Closed):
    id: int
    at: str
    by: str
    action: str
    job_id: str | None
    detail: dict[str, Any]


class Audit(Closed):
    items: list[AuditEntry]


class ScheduleChange(Closed):
    schedule: str
    changed: bool = Field(description="false: it was paused (or firing) already")


class ScheduleRun(Closed):
    schedule: str
    created: int = Field(description="jobs queued now; 0 when this run's key was sent already")
    items: list[Enqueued]
