"""The job record, the event record, and the requests that create and finish jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Mapping
from uuid import UUID

from redrive.core.states import Status

JSON = Any
"""A value that survives ``json.dumps``: dict, list, str, int, float, bool or None."""

# The columns of both job tables, in schema order. The migrations must produce
# exactly these (a test checks it) and the stores map rows through them.
JOB_COLUMNS: tuple[str, ...] = (
    "id",
    "task",
    "queue",
    "args",
    "kwargs",
    "status",
    "priority",
    "run_at",
    "attempts",
    "max_attempts",
    "owner",
    "lease_token",
    "lease_owner",
    "lease_expires_at",
    "last_error_code",
    "last_error_message",
    "error_code",
    "error_message",
    "result",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "failed_at",
)

EVENT_COLUMNS: tuple[str, ...] = (
    "id",
    "job_id",
    "at",
    "from_status",
    "to_status",
    "attempt",
    "meta",
)


@dataclass(frozen=True, slots=True)
class Job:
    id: UUID
    task: str
    queue: str
    args: list[JSON]
    kwargs: dict[str, JSON]
    status: Status
    priority: int
    run_at: datetime
    attempts: int
    max_attempts: int
    owner: str | None
    lease_token: UUID | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    last_error_code: str | None
    last_error_message: str | None
    error_code: str | None
    error_message: str | None
    result: JSON
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    failed_at: datetime | None

    def to_dict(self) -> dict[str, JSON]:
        """JSON-ready: ids and times as strings."""
        return {name: _plain(getattr(self, name)) for name in JOB_COLUMNS}

    @property
    def lease(self) -> Lease:
        if self.lease_token is None:
            raise ValueError(f"job {self.id} is {self.status}, it holds no lease")
        return Lease(job_id=self.id, token=self.lease_token)


@dataclass(frozen=True, slots=True)
class JobEvent:
    id: int
    job_id: UUID
    at: datetime
    from_status: Status | None
    to_status: Status
    attempt: int
    meta: dict[str, JSON]


    def to_dict(self) -> dict[str, JSON]:
        return {name: _plain(getattr(self, name)) for name in EVENT_COLUMNS}


def _plain(value: Any) -> JSON:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    return value


@dataclass(frozen=True, slots=True)
class NewJob:
    """What enqueue asks the store to create. ``delay`` counts from the database's clock."""

    id: UUID
    task: str
    queue: str
    args: list[JSON]
    kwargs: dict[str, JSON]
    priority: int
    max_attempts: int
    owner: str | None = None
    run_at: datetime | None = None
    delay: timedelta | None = None


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof that a worker holds a running job: every write about the job is fenced on it."""

    job_id: UUID
    token: UUID


@dataclass(frozen=True, slots=True)
class Completion:
    lease: Lease
    result: JSON
    meta: Mapping[str, JSON] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RetryLater:
    lease: Lease
    delay: timedelta
    error_code: str
    error_message: str
    meta: Mapping[str, JSON] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FailNow:
    lease: Lease
    error_code: str
    error_message: str
    meta: Mapping[str, JSON] = field(default_factory=dict)
