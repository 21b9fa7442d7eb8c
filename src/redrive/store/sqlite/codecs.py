"""How rows and values cross between SQLite and redrive: times as epoch
seconds, JSON columns, a row as a job, a dead letter, an outbox row or an
audit entry."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import Any, TypeVar, overload
from uuid import UUID

from redrive.core import checks, ids
from redrive.core.job import DEAD_LETTER_COLUMNS, JOB_COLUMNS, DeadLetter, DeadLetterFilter, Job, Lease
from redrive.core.outbox import OUTBOX_COLUMNS, OutboxRow, OutboxStatus
from redrive.core.states import Status
from redrive.store.reads import AuditEntry
from redrive.store.times import TimeMemo

T = TypeVar("T")
_JSON_COLUMNS = ("args", "kwargs", "result", "stage_attempts", "checkpoint", "dependencies")


_TIME_COLUMNS = (
    "run_at", "lease_expires_at", "created_at", "updated_at",
    "started_at", "finished_at", "failed_at", "first_failed_at",
)


_NO_LEASE = {"lease_token": None, "lease_owner": None, "lease_expires_at": None}


@overload
def _time(value: float) -> datetime: ...


@overload
def _time(value: None) -> None: ...


def _time(value: float | None) -> datetime | None:
    return None if value is None else _times(value)


def _from_epoch(value: float) -> datetime:
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):  # outside the years 1 to 9999
        return checks.TIME_FLOOR if value < 0 else checks.TIME_CEILING


_times = TimeMemo(_from_epoch)


def _audit(row: sqlite3.Row) -> AuditEntry:
    return AuditEntry(row["id"], _time(row["at"]), row["by"], row["action"],
                      None if row["job_id"] is None else UUID(row["job_id"]), json.loads(row["detail"]))


def _epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _letter_filter(where: DeadLetterFilter) -> dict[str, Any]:
    return {
        "error_class": where.error_class, "stage": where.stage, "task": where.task, "owner": where.owner,
        "state": where.state, "older_than_s": None if where.older_than is None else where.older_than.total_seconds(),
        "newer_than_s": None if where.newer_than is None else where.newer_than.total_seconds(),
        "job_id": None if where.job_id is None else str(where.job_id),
    }


def _lease(lease: Lease) -> dict[str, str]:
    return {"id": str(lease.job_id), "token": lease.token.hex}


def _dead_letter(row: sqlite3.Row) -> DeadLetter:
    values = {name: row[name] for name in DEAD_LETTER_COLUMNS}
    values["job_id"] = UUID(values["job_id"])
    for name in ("stage_attempts", "context", "notes"):
        values[name] = json.loads(values[name])
    for name in ("first_failure_at", "last_failure_at", "replayed_at", "resolved_at"):
        values[name] = _time(values[name])
    values["retryable"] = bool(values["retryable"])
    values["escalated"] = bool(values["escalated"])
    return DeadLetter(**values)


def _outbox_row(row: sqlite3.Row) -> OutboxRow:
    values = {name: row[name] for name in OUTBOX_COLUMNS}
    values.update(status=OutboxStatus(values["status"]), job_id=UUID(values["job_id"]),
                  notified_at=_time(values["notified_at"]), created_at=_time(values["created_at"]),
                  updated_at=_time(values["updated_at"]))
    return OutboxRow(**values)


# The payload a claim builds with json_array(): one value, no space around it,
# so the decoder's own step suffices (json.loads checks for a byte-order mark
# and trailing space first: a third of the call).
_payload = json.JSONDecoder().raw_decode


def _claimed(row: sqlite3.Row) -> tuple[Job, str | None]:
    """A row of ``jobs_claim``, in its column order, and why it cannot run (or None)."""
    (id, task, queue, priority, run_at, attempts, max_attempts, owner, lease_token, lease_owner,
     lease_expires_at, last_error_code, last_error_message, created_at, updated_at, started_at,
     stage, manual_retry_count, first_failed_at, idempotency_key, version, payload) = row
    (args, kwargs, stage_attempts, checkpoint, dependencies), _ = _payload(payload)
    job = Job(
        ids.uuid_from_text(id), task, queue, args, kwargs, Status.RUNNING, priority, _time(run_at), attempts,
        max_attempts, owner, ids.uuid_from_text(lease_token), lease_owner, _time(lease_expires_at),
        last_error_code, last_error_message, None, None, None, _time(created_at),
        _time(updated_at), _time(started_at), None, None, stage, stage_attempts, checkpoint,
        manual_retry_count, _time(first_failed_at), dependencies, idempotency_key, version,
    )
    return job, checks.stored_problem(job.run_at, payload, [args, kwargs, checkpoint])


def _job(row: sqlite3.Row) -> Job:
    values = {name: row[name] for name in JOB_COLUMNS}
    values["id"] = UUID(values["id"])
    values["status"] = Status(values["status"])
    if values["lease_token"] is not None:
        values["lease_token"] = UUID(values["lease_token"])
    for name in _JSON_COLUMNS:
        if values[name] is not None:
            values[name] = json.loads(values[name])
    for name in _TIME_COLUMNS:
        values[name] = _time(values[name])
    return Job(*values.values())  # in JOB_COLUMNS order; positional is cheaper


