"""What a client may send. Every model forbids fields it does not name, so
status, owner, attempts, lease, result, error fields and timestamps sent on
a create or an action are refused (422), never quietly taken or dropped."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from redrive.core.states import Status

MAX_AGE_S = 100 * 366 * 86400  # a century: more is a typo, and overflows timedelta


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EnqueueBody(Strict):
    task: str = Field(min_length=1, max_length=255)
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    queue: str | None = Field(default=None, min_length=1, max_length=255)
    priority: int | None = Field(default=None, ge=-1_000_000, le=1_000_000)
    run_at: datetime | None = None
    delay_s: float | None = Field(default=None, ge=0, le=366 * 86400)
    max_attempts: int | None = Field(default=None, ge=1, le=1000)
    version: int = Field(default=1, ge=1, le=1_000_000)
    dedupe: list[Any] | None = None


MAX_BATCH = 1000


class BatchItem(EnqueueBody):
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=255)


class BatchBody(Strict):
    # Checked by the route, not here: over the limit is a 400, not a 422.
    jobs: list[BatchItem] = Field(min_length=1)


class NoteBody(Strict):
    text: str = Field(min_length=1, max_length=4000)


class ReplayBody(Strict):
    ids: list[int] = Field(min_length=1, max_length=1000)
    from_start: bool = False


class BulkFilter(Strict):
    """Which jobs a bulk action is for; every field left out matches all.
    ``status`` narrows what the action applies to (retry: failed; cancel:
    scheduled, queued, running; delete: succeeded, failed, cancelled)."""

    status: list[Status] | None = Field(default=None, max_length=6)
    task: str | None = Field(default=None, min_length=1, max_length=255)
    queue: str | None = Field(default=None, min_length=1, max_length=255)
    owner: str | None = Field(default=None, min_length=1, max_length=255)
    error_code: str | None = Field(default=None, min_length=1, max_length=255)
    created_after: datetime | None = None
    created_before: datetime | None = None


class BulkBody(Strict):
    action: Literal["retry", "cancel", "delete"]
    filter: BulkFilter = Field(default_factory=BulkFilter)
    dry_run: bool = Field(default=False, description="count what would be acted on, and change nothing")


class LetterFilter(Strict):
    """Which open dead letters a bulk replay or resolve is for; every field left out matches all."""

    error_class: str | None = Field(default=None, min_length=1, max_length=255)
    stage: str | None = Field(default=None, min_length=1, max_length=255)
    task: str | None = Field(default=None, min_length=1, max_length=255)
    owner: str | None = Field(default=None, min_length=1, max_length=255)
    older_than_s: float | None = Field(default=None, ge=0, le=MAX_AGE_S)
    newer_than_s: float | None = Field(default=None, ge=0, le=MAX_AGE_S)


class LetterBulkBody(Strict):
    action: Literal["replay", "resolve"]
    filter: LetterFilter = Field(default_factory=LetterFilter)
    from_start: bool = Field(default=False, description="replay only: run every stage again")
    note: str | None = Field(default=None, min_length=1, max_length=2000,
                             description="resolve only: why, added to each letter as a note")
    dry_run: bool = Field(default=False, description="count what would be changed, and change nothing")


class ResolveBody(Strict):
    ids: list[int] = Field(min_length=1, max_length=1000)
    note: str | None = Field(default=None, min_length=1, max_length=2000,
                             description="why, added to each letter as a note")
