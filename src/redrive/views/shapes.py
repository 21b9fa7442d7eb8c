"""What each record looks like when shown: the keys and types of every
dictionary ``redrive.views`` builds, with a line on each field that needs
one. The HTTP API's response models are derived from these (``redrive.http
.responses``), so a field a view adds and the API does not name cannot
happen: both are this one declaration.

Times are ``Timestamp``: ISO 8601 text in a view, a date-time in the API's
schema. The line on a field (``Annotated[..., "..."]``) is its description
in the OpenAPI document.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NewType, TypedDict

from redrive.core.breaker import State
from redrive.core.outbox import OutboxStatus
from redrive.core.states import Status

Timestamp = NewType("Timestamp", str)  # ISO 8601, UTC


class JobShape(TypedDict):
    id: str
    task: str
    queue: str
    args: Annotated[list[Any], "redacted"]
    kwargs: Annotated[dict[str, Any], "redacted"]
    status: Status
    priority: int
    run_at: Timestamp
    attempts: int
    max_attempts: int
    owner: str | None
    lease_owner: Annotated[str | None, "the worker running it"]
    lease_expires_at: Timestamp | None
    last_error_code: str | None
    last_error_message: str | None
    error_code: str | None
    error_message: str | None
    result: Annotated[Any, "redacted"]
    created_at: Timestamp
    updated_at: Timestamp
    started_at: Timestamp | None
    finished_at: Timestamp | None
    failed_at: Timestamp | None
    stage: Annotated[str | None, "where a retry or replay resumes"]
    stage_attempts: dict[str, int]
    checkpoint: Annotated[dict[str, Any], "each finished stage's output, redacted"]
    manual_retry_count: int
    first_failed_at: Timestamp | None
    dependencies: list[str]
    idempotency_key: str | None
    version: int


class EventShape(TypedDict):
    id: int
    job_id: str
    at: Timestamp
    from_status: Status | None
    to_status: Status
    attempt: int
    meta: Annotated[dict[str, Any], "redacted: stage, duration, error code, who acted"]


class ProgressShape(TypedDict):
    fraction: Annotated[float | None, "from 0 to 1: what the task said, else done out of total"]
    done: int | None
    total: int | None
    note: Annotated[str | None, "redacted, one line"]
    at: Annotated[Timestamp | None, "when it was written (at most once a second a job)"]


class DeadLetterShape(TypedDict):
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
    first_failure_at: Timestamp
    last_failure_at: Timestamp
    escalated: bool
    previous_id: int | None
    replayed_at: Timestamp | None
    replayed_by: str | None
    replay_from: Literal["stage", "start"] | None
    notes: list[dict[str, Any]]
    resolved_at: Timestamp | None
    resolved_by: str | None
    state: Literal["open", "replayed", "resolved", "escalated"]


class FacetsShape(TypedDict):
    total: int
    error_classes: dict[str, int]
    stages: Annotated[dict[str, int], '"" counts letters without a stage']


class BreakerShape(TypedDict):
    name: str
    state: State
    forced: bool
    failure_percent: float
    calls_in_window: int
    seconds_open: float


class BreakerEventShape(TypedDict):
    name: str
    at: Timestamp
    from_state: str
    to_state: str
    reason: str
    by: str | None


class OutboxShape(TypedDict):
    key: str
    status: OutboxStatus
    provider_id: str | None
    notified_at: Timestamp | None
    job_id: str
    sends: int
    reconciliations: int
    error_code: str | None
    error_message: str | None
    created_at: Timestamp
    updated_at: Timestamp


class QueueShape(TypedDict):
    queue: str
    counts: Annotated[dict[str, int], "active jobs by state"]
    estimated: Annotated[bool, "true: a waiting count past 1,000 is an estimate, never below the exact count "
                               "(PostgreSQL)"]
    at_least: Annotated[bool, "true: a waiting count is 10,000, counted no further: at least that many (SQLite)"]
    oldest_due_age_s: float | None
    paused: bool
    paused_by: str | None


class MinuteShape(TypedDict):
    queue: str
    minute: Annotated[Timestamp, "the minute's start, UTC"]
    status: Literal["succeeded", "failed", "cancelled"]
    count: int


class TimingShape(TypedDict):
    duration_p50_ms: Annotated[float | None, "estimated from duration buckets; null: nothing timed"]
    duration_p95_ms: float | None
    wait_p50_ms: Annotated[float | None, "from due to started, estimated from wait buckets"]
    wait_p95_ms: float | None


class ChartSlotShape(TimingShape):
    start: Timestamp
    succeeded: int
    failed: Annotated[int, "failed for good"]
    retried: Annotated[int, "attempts that failed and were retried"]
    cancelled: Annotated[int, "cancelled while running"]


class EndingsShape(TypedDict):
    succeeded: int
    failed: int
    retried: int
    cancelled: int


class ChartSeriesShape(TimingShape):
    key: Annotated[str, "the queue or the task"]
    totals: EndingsShape
    slots: Annotated[list[ChartSlotShape], "oldest first, every slot of the window"]


class ChartsShape(TypedDict):
    window: Literal["1h", "24h", "7d"]
    slot_seconds: int
    by: Literal["queue", "task"]
    start: Annotated[Timestamp, "the first slot's start, UTC"]
    series: Annotated[list[ChartSeriesShape], "by key; keys with nothing in the window are left out"]


class ReplacedShape(TypedDict):
    pid: int
    worker: str
    why: str
    reason: Annotated[str, "hard_time_limit, recycled or died"]
    at: Timestamp | None


class WorkerShape(TypedDict):
    id: str
    kind: Annotated[Literal["worker", "supervisor"], "a supervisor runs no job: it runs worker processes"]
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    version: str
    running: Annotated[int, "jobs it runs now"]
    jobs_run: Annotated[int, "jobs it has run since it started"]
    memory_bytes: Annotated[int | None, "its resident memory; null: not known on this system"]
    orphaned: Annotated[int, "threads still running a sync task abandoned at its time limit"]
    supervisor: Annotated[str | None, "the supervisor that started it; null: started on its own"]
    children: Annotated[int | None, "a supervisor's worker processes; null for a worker"]
    restarts: Annotated[int, "worker processes a supervisor replaced"]
    restarts_by: Annotated[dict[str, int], "a supervisor's replacements by reason: hard_time_limit, recycled, died"]
    replaced: Annotated[list[ReplacedShape], "a supervisor's latest replacements: whom, why, when"]
    started_at: Timestamp
    heartbeat_at: Timestamp
    seconds_since_heartbeat: float
    stale: Annotated[bool, "it missed three heartbeats: killed, or cut off from the store"]


class ZoneShape(TypedDict):
    next_at: Timestamp | None
    last_key: str | None


class ScheduleShape(TypedDict):
    name: str
    fired_until: Timestamp | None
    updated_at: Timestamp | None
    paused_by: Annotated[str | None, "who paused it; null: it fires"]
    task: Annotated[str | None, "null: no longer declared by the app"]
    cron: str | None
    zones: dict[str, ZoneShape]


class AuditShape(TypedDict):
    id: int
    at: Timestamp
    by: str
    action: str
    job_id: str | None
    detail: dict[str, Any]


class EdgeShape(TypedDict):
    step: Annotated[str, "the parent step's name"]
    policy: Annotated[Literal["succeeded", "not_failed", "ended"], "what the parent's ending must be for it to run"]


class StepShape(TypedDict):
    name: Annotated[str, "the step's name; a fan-out's members share it"]
    after: list[EdgeShape]
    counts: Annotated[dict[str, int], "its jobs by status"]


class WorkflowShape(TypedDict):
    id: str
    name: str
    owner: str | None
    key: Annotated[str | None, "the key it was created under, once per owner"]
    status: Literal["running", "blocked", "succeeded", "failed", "cancelled"]
    created_at: Timestamp
    cancelled_at: Timestamp | None
    cancelled_by: str | None
    spawned_by: Annotated[str | None, "the job whose success created it (redrive.spawn)"]
    counts: Annotated[dict[str, int], "every step's jobs by status"]
    progress: Annotated[float, "its steps' progress: the share of them that have ended, 0 to 1"]
    steps: Annotated[list[StepShape], "in the order declared"]
