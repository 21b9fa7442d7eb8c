"""The rules around a job's end and its second chance, decided once here and
applied by every store: when a new dead letter is escalated, what a failure's
and a retry's events say, and where a revived job resumes.

The memory and SQLite stores call these functions; the PostgreSQL store's
``jobs_finish`` keeps a mirror of ``escalates`` and of the event payloads
inside one statement (for atomicity, as River's CTEs do), and
the behaviour suite holds the three to one result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from redrive.core.job import JSON, Job
from redrive.errors import ConfigError

MANUAL_RETRY = "manual_retry"
REPLAY = "replay"


def escalates(*, previous_error_class: str | None, previous_replayed: bool, error_class: str,
              retryable: bool) -> bool:
    """A new dead letter is escalated when the job's previous letter was
    replayed and the job failed again with the same non-retryable class: the
    remediation did not work, and a person should look before anyone replays."""
    return previous_replayed and previous_error_class == error_class and not retryable


def fail_meta(*, error_code: str, error_class: str, stage: str | None, dead_letter_id: int,
              escalated: bool, extra: Mapping[str, JSON]) -> dict[str, JSON]:
    """The event of running -> failed."""
    return {"error_code": error_code, "error_class": error_class, "stage": stage,
            "dead_letter_id": dead_letter_id, "escalated": escalated, **extra}


def retry_meta(*, error_code: str, delay: timedelta, stage: str | None,
               extra: Mapping[str, JSON]) -> dict[str, JSON]:
    """The event of running -> queued for a retry."""
    return {"error_code": error_code, "delay_ms": round(delay.total_seconds() * 1000), "stage": stage, **extra}


def cancel_meta(*, by: str, error_code: str, stage: str | None, extra: Mapping[str, JSON]) -> dict[str, JSON]:
    """The event of running -> cancelled when a retry met a cancel request:
    who asked, and the error the attempt ended with."""
    return {"error_code": error_code, "stage": stage, **extra, "by": by}


@dataclass(frozen=True, slots=True)
class RevivePlan:
    """How a failed job goes back to the queue, decided before the store is
    touched; the store applies it only while the job is still the failure the
    plan was made from (``failed_at``)."""

    reason: str  # MANUAL_RETRY or REPLAY
    by: str | None
    replay_from: str  # "stage" (the failed one) or "start"
    stage: str | None  # where it resumes; None: the first stage, which the worker finds
    stage_attempts: dict[str, int]  # the counts it keeps (the resumed stage starts afresh)
    keep_checkpoint: bool  # finished stages' outputs stay, so they do not run again
    manual_retries: int  # the job's manual_retry_count after this
    failed_at: datetime | None  # the failure this plan revives

    def meta(self, dead_letter_ids: list[int]) -> dict[str, Any]:
        """The event of failed -> queued."""
        return {"reason": self.reason, "by": self.by, "from": self.replay_from, "stage": self.stage,
                "dead_letter_ids": sorted(dead_letter_ids)}


@dataclass(frozen=True, slots=True)
class Revival:
    """One failed job to queue again (``Store.jobs_revive``): its plan and,
    for a replay, the dead letter it answers."""

    job_id: UUID
    plan: RevivePlan
    dead_letter_id: int | None = None


def distinct_jobs(revivals: Sequence[Revival]) -> Sequence[Revival]:
    """``revivals``, once it is checked that no job is in it twice: a batch
    revives each job once, and which of two plans would win is no store's
    choice."""
    if len({r.job_id for r in revivals}) != len(revivals):
        raise ConfigError("one batch of revivals names a job twice")
    return revivals


def revive_plan(job: Job, *, reason: str, by: str | None, from_start: bool = False,
                first_stage: str | None = None) -> RevivePlan:
    """A manual retry or a replay of ``job`` (failed): fresh attempts, at the
    failed stage with the finished stages' outputs kept, or from the start
    (``first_stage``, None when the caller does not know the task) with none."""
    if from_start:
        stage, counts, keep = first_stage, {}, False
    else:
        stage, keep = job.stage, True
        counts = {name: n for name, n in job.stage_attempts.items() if name != stage}
    return RevivePlan(reason=reason, by=by, replay_from="start" if from_start else "stage", stage=stage,
                      stage_attempts=counts, keep_checkpoint=keep,
                      manual_retries=job.manual_retry_count + (reason == MANUAL_RETRY),
                      failed_at=job.failed_at)
