"""The read side: what operators, the API and the dashboard read, apart from
the write seam the worker uses (``store/port.py``), as River UI's read
driver sits on River's.

Every list is a ``Page``: it says whether more exist and how to get them (a
keyset cursor), so nothing is ever cut silently. Counts come from the table
the claim reads (active jobs), never from a scan of finished history. Each
store implements both protocols; ``redrive.testing.suite.reads`` holds them to
one behaviour.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar
from uuid import UUID

from redrive.core.job import JSON, DeadLetter, DeadLetterFilter, Job
from redrive.core.outbox import OutboxRow, OutboxStatus
from redrive.core.progress import Progress
from redrive.core.states import ACTIVE, Status
from redrive.errors import ConfigError
from redrive.store.port import WORKER_DETAIL, BreakerEvent

T = TypeVar("T")

MAX_PAGE = 1000  # the most one page holds, whatever is asked


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """Some items of a list, in its order, and the cursor of the next page
    (None when this page is the last). Iterates and indexes like its items."""

    items: list[T]
    next_cursor: str | None = None

    @property
    def more(self) -> bool:
        return self.next_cursor is not None

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> T:
        return self.items[index]


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs a list shows; every field left None matches all."""

    statuses: tuple[Status, ...] | None = None
    task: str | None = None
    queue: str | None = None
    owner: str | None = None
    error_code: str | None = None  # the failure's code, or the last error of a job waiting to retry
    idempotency_key: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None

    def matches(self, job: Job) -> bool:
        """The filter in Python: the memory store's, and the reference for the SQL ones."""
        return ((self.statuses is None or job.status in self.statuses)
                and (self.task is None or job.task == self.task)
                and (self.queue is None or job.queue == self.queue)
                and (self.owner is None or job.owner == self.owner)
                and (self.error_code is None
                     or (job.error_code or job.last_error_code) == self.error_code)
                and (self.idempotency_key is None or job.idempotency_key == self.idempotency_key)
                and (self.created_after is None or job.created_at >= self.created_after)
                and (self.created_before is None or job.created_at < self.created_before))


# Waiting jobs are counted one by one up to this many per queue and state;
# beyond, PostgreSQL estimates (``QueueStats.estimated``), so a page of
# queue counts costs the same at a million waiting jobs as at ten thousand.
EXACT_UP_TO = 1_000
# An estimate below this many is no estimate worth showing: such a (queue,
# state) is counted exactly up to it instead (a few milliseconds at most).
COUNTED_UP_TO = 20_000
# SQLite has no estimate to give: it counts up to this many and says "at least".
LOWER_BOUND_AT = 10_000

Pair = tuple[str, str]  # (queue, state)
K = TypeVar("K")


def shares(total: int, weights: Mapping[K, float]) -> dict[K, int]:
    """``total`` shared out in proportion to ``weights`` (equally when
    nothing weighs anything)."""
    whole = sum(weights.values())
    if whole <= 0:
        return {key: total // max(1, len(weights)) for key in weights}
    return {key: round(total * weight / whole) for key, weight in weights.items()}


def tables_of(statuses: Iterable[Status] | None) -> dict[str, bool]:
    """Which table a job list filtered to ``statuses`` reads: the live one
    holds only active jobs, the history only finished ones, so a filter to
    failed jobs never walks a million waiting ones (``jobs_page``'s ``live``
    and ``done``)."""
    wanted = set(Status) if statuses is None else set(statuses)
    return {"live": bool(wanted & ACTIVE), "done": bool(wanted - ACTIVE)}


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue's active jobs by state, how long its oldest due job has
    waited and how long its longest run has been going."""

    queue: str
    counts: dict[Status, int] = field(default_factory=dict)  # scheduled, queued and running
    oldest_due_age_s: float | None = None  # None: nothing due is waiting
    oldest_running_age_s: float | None = None  # since the longest-running job started; None: none runs
    paused_by: str | None = None  # who paused it; None: not paused (filled in by Admin.queues)
    estimated: bool = False  # a waiting count beyond EXACT_UP_TO is the database's estimate (PostgreSQL)
    at_least: bool = False  # a waiting count is only counted up to LOWER_BOUND_AT: at least that many (SQLite)


@dataclass(frozen=True, slots=True)
class RunEnded:
    """A job that ended (succeeded, or failed for good), and how long its last
    run took: None when no run timed it (the reclaim failed it)."""

    at: datetime
    task: str
    failed: bool
    duration_s: float | None


@dataclass(frozen=True, slots=True)
class Rollup:
    """How many of a queue's or a task's (``key``) attempts ended as ``kind``
    (or, kind ``wait``, waited) within ``bucket`` (core/rollups.py) in the slot
    starting ``at``."""

    at: datetime
    key: str
    kind: str
    bucket: int
    n: int


def rollups_of(rows: Iterable[Sequence[Any]]) -> list[Rollup]:
    """Rollups from rows of (at in seconds, key, kind, bucket, n); a chart's
    rows share a few dozen slot starts, each made a datetime once."""
    starts: dict[int, datetime] = {}
    out = []
    for at, key, kind, bucket, n in rows:
        if (start := starts.get(at)) is None:
            start = starts[at] = datetime.fromtimestamp(at, UTC)
        out.append(Rollup(start, key, kind, bucket, int(n)))
    return out


@dataclass(frozen=True, slots=True)
class MinuteCount:
    """How many of a queue's jobs ended in one minute (``minute``: its
    start, UTC), by how they ended (succeeded, failed for good, cancelled)."""

    queue: str
    minute: datetime
    status: Status
    count: int


@dataclass(frozen=True, slots=True)
class DeadLetterFacets:
    """How many dead letters match a filter, by error class and by stage."""

    total: int
    error_classes: dict[str, int]
    stages: dict[str, int]  # "" for letters without a stage
    by_task: dict[tuple[str, str], int] = field(default_factory=dict)  # (task, error class): how many

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, Any]]) -> DeadLetterFacets:
        """Added up from counts by task, error class and stage."""
        classes: Counter[str] = Counter()
        stages: Counter[str] = Counter()
        by_task: Counter[tuple[str, str]] = Counter()
        for row in rows:
            classes[row["error_class"]] += row["n"]
            stages[row["stage"] or ""] += row["n"]
            by_task[(row["task"], row["error_class"])] += row["n"]
        return cls(sum(classes.values()), dict(classes), dict(stages), dict(by_task))


def tallied(where: DeadLetterFilter) -> dict[str, str | None] | None:
    """``dead_letters_tally``'s parameters when a filter asks for every
    letter, or every letter in one state (open, replayed, resolved) and
    nothing more: the stores answer its facets from the counts kept as
    letters open and close, not by counting the letters. None for any other
    filter."""
    if where != DeadLetterFilter(state=where.state) or where.state == "escalated":
        return None
    return {"state": where.state}


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """Something an operator saw or did, on record: ``reveal`` (a job's
    original arguments) is the first such action."""

    id: int
    at: datetime
    by: str
    action: str
    job_id: UUID | None
    detail: dict[str, Any]


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker process as it last reported itself (``WorkerReport``), with
    the store's times of its registration and its last heartbeat."""

    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    version: str
    running: int
    started_at: datetime
    heartbeat_at: datetime
    # as in WorkerReport
    jobs_run: int = 0
    memory_bytes: int | None = None
    orphaned: int = 0
    supervisor: str | None = None
    children: int | None = None
    restarts: int = 0
    replaced: Sequence[Mapping[str, JSON]] = ()
    restarts_by: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, row: Any, **columns: Any) -> WorkerInfo:
        """From a registry row: its columns (``columns`` override them) and
        its ``detail``, of which only what this version knows is read."""
        detail = row["detail"] if isinstance(row["detail"], Mapping) else json.loads(row["detail"] or "{}")
        known = {name: detail[name] for name in WORKER_DETAIL if detail.get(name) is not None}
        base = {name: row[name] for name in ("id", "host", "pid", "queues", "concurrency", "version", "running",
                                             "started_at", "heartbeat_at") if name not in columns}
        return cls(**{**base, **columns, **known})


@dataclass(frozen=True, slots=True)
class ScheduleState:
    name: str
    fired_until: datetime  # every firing up to here has been enqueued
    updated_at: datetime
    paused_by: str | None = None  # who paused it; None: it fires


class Reads(Protocol):
    """A store's read side: what the pages, the CLI's lists, the alerts and
    the metrics read, and nothing the runtime needs (``Store``) or an
    operator's action writes (``Operations``)."""

    def jobs_page(self, *, where: JobFilter, after: str | None = None, limit: int = 50) -> Page[Job]:
        """Newest first (by creation, then id), active and finished alike."""

    def queues_stats(self, *, exact_up_to: int | None = None) -> list[QueueStats]:
        """Every queue with active jobs. A waiting count is exact up to
        ``EXACT_UP_TO`` (or ``exact_up_to``, if more: what an alert rule's
        threshold needs decided exactly), beyond which a store may estimate
        (``estimated``) or say "at least" (``at_least``), never below it."""

    def runs_ended(self, *, since: datetime, limit: int = 10_000) -> list[RunEnded]:
        """Jobs that succeeded or failed for good at or after ``since``,
        newest first, at most ``limit``: what alert rules on failure rates
        and durations read, for every worker's jobs. Reads the history's
        ``finished_at`` index and each job's last event."""

    def rollups_read(self, *, since: datetime, slot: timedelta = timedelta(minutes=1), by: str = "queue",
                     timed: bool = True) -> list[Rollup]:
        """The rollups (core/rollups.py) from ``since`` on, oldest first,
        added up into slots ``slot`` wide (whole minutes; a row of a folded
        hour lands in its hour's slot) per queue or per task (``by``); with
        ``timed`` False, each kind's buckets together (``UNTIMED``) and no
        waits. What every chart reads, never the history."""

    def dead_letters_page(
        self, *, where: DeadLetterFilter, after: str | None = None, limit: int = 50,
    ) -> Page[DeadLetter]:
        """Newest first. ``where.limit`` is ignored: ``limit`` sizes the page."""

    def dead_letter_facets(self, *, where: DeadLetterFilter) -> DeadLetterFacets: ...

    def outbox_page(
        self, *, status: OutboxStatus | None = None, job_id: UUID | None = None, after: str | None = None,
        limit: int = 50,
    ) -> Page[OutboxRow]:
        """Oldest first (by creation, then key)."""

    def schedules_list(self) -> list[ScheduleState]:
        """Every schedule's checkpoint, by name."""

    def workers_list(self) -> list[WorkerInfo]:
        """Every registered worker, oldest first (stale ones too: see ``WORKER_STALE_AFTER_S``)."""

    def audits_list(self, *, job_id: UUID | None) -> list[AuditEntry]:
        """A job's audit trail, oldest first; with ``job_id=None`` the
        entries about no one job (queue pauses, bulk actions), the latest
        1,000, oldest first."""

    def dead_letter_get(self, *, id: int) -> DeadLetter | None: ...

    def progress_read(self, *, job_ids: Sequence[UUID]) -> dict[UUID, Progress]:
        """The latest progress each job reported (``Store.progress_save``); a job that said none is left out."""

    def breaker_events_list(self, *, name: str) -> list[BreakerEvent]: ...

    def alerts_firing(self) -> dict[str, str]:
        """The alert rules firing now, each with its incident."""


def page_size(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError("limit (the page size) must be a positive integer")
    return min(limit, MAX_PAGE)


def encode_cursor(*key: Any) -> str:
    """An opaque cursor from the last item's sort key (JSON values)."""
    return base64.urlsafe_b64encode(json.dumps(list(key), separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None, size: int) -> list[Any] | None:
    """The sort key a cursor holds, or None for the first page."""
    if cursor is None:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        key = json.loads(text)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        key = None
    if not isinstance(key, list) or len(key) != size:
        raise ConfigError("that cursor is not one this list gave out")
    return key


def paged(rows: Sequence[T], limit: int, cursor_of: Any) -> Page[T]:
    """A page from up to ``limit + 1`` rows read: the extra one only says more exist."""
    items = list(rows[:limit])
    return Page(items, cursor_of(items[-1]) if len(rows) > limit and items else None)

