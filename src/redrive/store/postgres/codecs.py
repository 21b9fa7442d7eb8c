"""How rows and values cross between PostgreSQL and redrive: times as the
server sends them (leniently), JSON, a row as a job, a dead letter or an
outbox row, and the JSON documents the batched statements take."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import AdaptersMap, Loader
from psycopg.pq import Format
from psycopg.types.datetime import TimestamptzLoader
from psycopg.types.json import Jsonb, set_json_loads

from redrive.core import checks
from redrive.core.job import DEAD_LETTER_COLUMNS, JOB_COLUMNS, DeadLetter, DeadLetterFilter, Job, Lease, NewJob
from redrive.core.outbox import OUTBOX_COLUMNS, OutboxChange, OutboxRow, OutboxStatus
from redrive.core.states import Status
from redrive.core.transitions import KINDS, Cancellation, Completion, FailNow, Finish, Requeue, RetryLater, by_reclaim
from redrive.store.times import TimeMemo


class _LenientTimestamptz(TimestamptzLoader):
    """A time PostgreSQL keeps but Python cannot (before year 1 or after 9999
    in UTC) reads as the nearest one Python can, so one such row cannot make
    a list or a claim batch fail; the claim then sets its job aside."""

    def load(self, data: Buffer) -> datetime:
        try:
            return super().load(data)
        except psycopg.DataError:
            text = bytes(data)
            return checks.TIME_FLOOR if b"BC" in text or text.startswith(b"0001-") else checks.TIME_CEILING


class _LenientTimestamptzBinary(Loader):
    """The same leniency for a time read in binary (microseconds since
    2000-01-01 UTC; infinity is the largest or smallest of them)."""

    format = Format.BINARY

    def load(self, data: Buffer) -> datetime:
        return _binary_times(bytes(data))


def _from_binary(data: bytes) -> datetime:
    micros = int.from_bytes(data, "big", signed=True)
    try:
        return _PG_EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        return checks.TIME_FLOOR if micros < 0 else checks.TIME_CEILING
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_binary_times = TimeMemo(_from_binary)
_decode_json = json.JSONDecoder().raw_decode


def _json_from_server(data: str | bytes) -> Any:
    """A JSON value as PostgreSQL writes one (one value, nothing around it,
    UTF-8): a quarter of ``json.loads``'s time on bytes, which first guesses
    their encoding. Every claimed job reads one."""
    text = data if isinstance(data, str) else data.decode()
    try:
        return _decode_json(text)[0]
    except ValueError:  # what json.loads says of it (a ``json`` value may start with a space)
        return json.loads(text)


def _adapters() -> AdaptersMap:
    """How every connection of the store reads times and JSON, given to it as
    it connects (``context=``): no connection is open without them."""
    adapters = AdaptersMap(psycopg.adapters)
    adapters.register_loader("timestamptz", _LenientTimestamptz)
    adapters.register_loader("timestamptz", _LenientTimestamptzBinary)
    set_json_loads(_json_from_server, adapters)
    return adapters


def _job(row: dict) -> Job:
    values = {name: row[name] for name in JOB_COLUMNS}
    values["status"] = Status(values["status"])
    for name, empty in _EMPTY:  # stored as NULL (migrations 0036, 0039)
        if values[name] is None:
            values[name] = empty()
    if values["updated_at"] is None:  # not changed since it was created, or since it ended (migration 0039)
        values["updated_at"] = values["finished_at"] or values["created_at"]
    return Job(*values.values())  # in JOB_COLUMNS order; positional is cheaper


# What a job holds that is stored as NULL when it is what every new job has
# (an empty collection, the first version, no manual retry), and what it reads as.
_EMPTY: tuple[tuple[str, Callable[[], Any]], ...] = (
    ("kwargs", dict), ("stage_attempts", dict), ("checkpoint", dict), ("dependencies", list),
    ("version", lambda: 1), ("manual_retry_count", int))


def _claimed(row: tuple) -> Job:
    """A row of ``jobs_claim``, in its column order."""
    (id, task, queue, priority, run_at, attempts, max_attempts, owner, lease_token, lease_owner,
     lease_expires_at, last_error_code, last_error_message, created_at, updated_at, started_at,
     stage, manual_retry_count, first_failed_at, idempotency_key, version,
     args, kwargs, stage_attempts, checkpoint, dependencies, _place) = row
    return Job(
        id, task, queue, args, kwargs or {}, Status.RUNNING, priority, run_at, attempts, max_attempts,
        owner, lease_token, lease_owner, lease_expires_at, last_error_code, last_error_message,
        None, None, None, created_at, updated_at, started_at, None, None, stage, stage_attempts or {},
        checkpoint or {}, manual_retry_count or 0, first_failed_at, dependencies or [], idempotency_key,
        1 if version is None else version,
    )


def _outbox_row(row: dict) -> OutboxRow:
    values = {name: row[name] for name in OUTBOX_COLUMNS}
    values["status"] = OutboxStatus(values["status"])
    return OutboxRow(**values)


def _outbox_change(change: OutboxChange) -> dict[str, Any]:
    return {"status": change.status.value, "provider_id": change.provider_id, "notified": change.notified,
            "error_code": change.error_code, "error_message": change.error_message,
            "send_started": change.send_started, "reconciled": change.reconciled}


def _dead_letter(row: dict) -> DeadLetter:
    values = {name: row[name] for name in DEAD_LETTER_COLUMNS}
    values["stage_attempts"] = values["stage_attempts"] or {}
    return DeadLetter(**values)


def _letter_filter(where: DeadLetterFilter) -> dict[str, Any]:
    return {
        "error_class": where.error_class, "stage": where.stage, "task": where.task, "owner": where.owner,
        "state": where.state, "older_than_s": _seconds(where.older_than), "newer_than_s": _seconds(where.newer_than),
        "job_id": where.job_id,
    }


def _optional(mapping: Any) -> Any:
    return None if mapping is None else dict(mapping)


def _seconds(delta: timedelta | None) -> float | None:
    return None if delta is None else delta.total_seconds()


def _new_job_json(job: NewJob) -> dict[str, Any]:
    # A key left out reads as NULL (the insert statements put empty arguments
    # and priority 0 in its place): the client encodes and the server parses
    # half as much JSON for the most common job.
    out: dict[str, Any] = {"id": job.id.hex, "task": job.task, "queue": job.queue, "max_attempts": job.max_attempts}
    if job.args:
        out["args"] = job.args
    if job.kwargs:
        out["kwargs"] = job.kwargs
    if job.priority:
        out["priority"] = job.priority
    if job.owner is not None:
        out["owner"] = job.owner
    if job.run_at is not None:
        out["run_at"] = job.run_at.isoformat()
    if job.delay:
        out["delay_s"] = job.delay.total_seconds()
    if job.stage is not None:
        out["stage"] = job.stage
    if job.key is not None:
        out.update(
            idempotency_key=job.key.key, version=job.key.version, kind=job.key.kind,
            fingerprint=job.key.fingerprint,
            nonce=str(uuid4()),  # tells this enqueue's key rows from earlier ones
        )
    return out


_INT4 = range(-(2**31), 2**31)


def _timing(meta: Mapping[str, Any], key: str) -> int | None:
    """A success's run timing that its column holds (migration 0037): a
    whole number of ms in range. Any other value stays in the meta."""
    return value if type(value := meta.get(key)) is int and value in _INT4 else None


def _listed(values: Iterable[object]) -> str:
    """Values as ``string_to_array``'s text: comma-separated, None as empty."""
    return ",".join("" if v is None else str(v) for v in values)


def _successes(items: Sequence[tuple[int, Completion]]) -> dict[str, Any]:
    """``jobs_finish``'s successes (each with its place in the batch): their
    ids and lease tokens as lists of UUIDs (arrays, in binary), the rest as
    lists in text, one a field: PostgreSQL reads a list of numbers in a
    third of the time it takes the same batch apart as JSON objects
    (bench/NOTES.md). The results and the metas, any JSON, come as one JSON
    array each, or NULL when every one is empty, as it is for most batches.
    A success's run timings go in columns of their own (migration 0037), out
    of its meta: a history row's 8 bytes instead of a JSON object's 55."""
    metas, durations, waits = [], [], []
    for _, item in items:
        duration, wait = _timing(item.meta, "duration_ms"), _timing(item.meta, "wait_ms")
        durations.append(duration)
        waits.append(wait)
        apart = {key for key, value in (("duration_ms", duration), ("wait_ms", wait)) if value is not None}
        metas.append({k: v for k, v in item.meta.items() if k not in apart})  # the caller's stays whole
    results = [item.result for _, item in items]
    reclaims = [by_reclaim(item) for _, item in items]
    return {
        "ids": [item.lease.job_id for _, item in items],
        "tokens": [item.lease.token for _, item in items],
        "ns": _listed(n for n, _ in items),
        "dur_ms": _listed(durations), "wait_ms": _listed(waits),
        "results": Jsonb(results) if any(r is not None for r in results) else None,
        "metas": Jsonb(metas) if any(metas) else None,
        # the only writes that may end an expired lease
        "reclaims": _listed("t" if r else "f" for r in reclaims) if any(reclaims) else None,
    }


def _tally(added: dict[tuple[str, str, str, int], int]) -> dict[str, list[Any]]:
    """A tally (core/rollups.py) as ``jobs_ended`` takes it: a list a field."""
    keys = list(added)
    return {"queues": [k[0] for k in keys], "tasks": [k[1] for k in keys], "kinds": [k[2] for k in keys],
            "buckets": [k[3] for k in keys], "ns": list(added.values())}


def _finish_json(n: int, item: Finish) -> dict[str, Any]:
    """Item ``n`` of ``jobs_finish``, any kind but a success (``_successes``):
    its kind, its lease and what its kind needs; a retry's or a failure's
    details as one ``error`` object."""
    lease = item.lease
    # ids as 32 hex digits: PostgreSQL reads them as it reads the hyphenated text, which takes longer to write
    out: dict[str, Any] = {"n": n, "kind": KINDS[type(item)], "id": lease.job_id.hex, "token": lease.token.hex,
                           "meta": item.meta if type(item.meta) is dict else dict(item.meta)}
    if by_reclaim(item):
        out["reclaim"] = True  # the only write that may end an expired lease
    match item:
        case RetryLater():
            out["delay_s"] = item.delay.total_seconds()
            out["error"] = _present(code=item.error_code, message=item.error_message, stage=item.stage,
                                    stage_attempts=_optional(item.stage_attempts))
        case FailNow():
            out["error"] = _present(code=item.error_code, message=item.error_message,
                                    **{"class": item.error_class or item.error_code}, retryable=item.retryable,
                                    stage=item.stage, stage_attempts=_optional(item.stage_attempts),
                                    stack=item.stack, context=dict(item.context))
        case Cancellation():
            out["by"] = item.by
        case Requeue():
            out.update(delay_s=item.delay.total_seconds(), refund=int(item.refund))
    return out


def _present(**values: Any) -> dict[str, Any]:
    """Only the values given: a JSON null would read as a value (``coalesce`` keeps it)."""
    return {key: value for key, value in values.items() if value is not None}


def _applied(rows: list[dict]) -> set[Lease]:
    """The leases a fenced write applied, from rows of (id, lease_token)."""
    return {Lease(row["id"], row["lease_token"]) for row in rows}


def _lease_json(lease: Lease) -> dict[str, str]:
    return {"id": str(lease.job_id), "token": str(lease.token)}


def _leases(leases: Sequence[Lease]) -> dict[str, list[UUID]]:
    return {"ids": [l.job_id for l in leases], "tokens": [l.token for l in leases]}


