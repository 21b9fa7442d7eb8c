"""The rules every store applies, decided once in core/dead_letters.py."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta

from redrive.core.dead_letters import escalates, fail_meta, retry_meta, revive_plan
from redrive.core.job import NewJob
from redrive.core.states import Status

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def test_only_a_replayed_letter_failing_again_the_same_non_retryable_way_escalates() -> None:
    for replayed, same, retryable in itertools.product([True, False], repeat=3):
        got = escalates(previous_error_class="AUTH_DENIED" if same else "NOT_FOUND", previous_replayed=replayed,
                        error_class="AUTH_DENIED", retryable=retryable)
        assert got == (replayed and same and not retryable)
    assert not escalates(previous_error_class=None, previous_replayed=False, error_class="X", retryable=False)


def test_event_payloads_put_the_caller_s_meta_last() -> None:
    assert fail_meta(error_code="E", error_class="C", stage="llm", dead_letter_id=4, escalated=True,
                     extra={"duration_ms": 9}) == {"error_code": "E", "error_class": "C", "stage": "llm",
                                                   "dead_letter_id": 4, "escalated": True, "duration_ms": 9}
    assert retry_meta(error_code="E", delay=timedelta(milliseconds=1500), stage=None, extra={}) == {
        "error_code": "E", "delay_ms": 1500, "stage": None}


def _failed(**fields):
    job = NewJob(id=uuid.uuid4(), task="criticize", queue="q", args=[], kwargs={}, priority=0,
                 max_attempts=15, stage="fetch").created(status=Status.FAILED, run_at=NOW, at=NOW)
    for name, value in {"failed_at": NOW, "stage": "llm", "checkpoint": {"fetch": "page"},
                        "stage_attempts": {"fetch": 1, "llm": 5}, "manual_retry_count": 2, **fields}.items():
        setattr(job, name, value)
    return job


def test_a_revive_resumes_at_the_failed_stage_or_from_the_start() -> None:
    job = _failed()
    at_stage = revive_plan(job, reason="replay", by="ops")
    assert (at_stage.stage, at_stage.stage_attempts, at_stage.keep_checkpoint) == ("llm", {"fetch": 1}, True)
    assert (at_stage.manual_retries, at_stage.failed_at, at_stage.replay_from) == (2, NOW, "stage")
    fresh = revive_plan(job, reason="manual_retry", by="ann", from_start=True, first_stage="fetch")
    assert (fresh.stage, fresh.stage_attempts, fresh.keep_checkpoint) == ("fetch", {}, False)
    assert fresh.manual_retries == 3
    assert fresh.meta([7, 3]) == {"reason": "manual_retry", "by": "ann", "from": "start", "stage": "fetch",
                                  "dead_letter_ids": [3, 7]}
