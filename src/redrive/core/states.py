"""Job states and the one table of legal transitions."""

from __future__ import annotations

from enum import StrEnum

from redrive.errors import IllegalTransition


class Status(StrEnum):
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


# Jobs in these states live in the hot table the claim reads; the rest move to
# the history table in the same statement that finishes them.
ACTIVE = frozenset({Status.SCHEDULED, Status.QUEUED, Status.RUNNING})
ACTIVE_ORDER = (Status.SCHEDULED, Status.QUEUED, Status.RUNNING)  # as a queue's counts are shown
TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED})

# ``None`` is "not yet a job": enqueue creates a job in one of its targets.
# A due ``scheduled`` job is claimed directly: promoting it to ``queued`` first
# would cost a write per job and tell nobody anything.
TRANSITIONS: dict[Status | None, frozenset[Status]] = {
    None: frozenset({Status.SCHEDULED, Status.QUEUED}),
    Status.SCHEDULED: frozenset({Status.QUEUED, Status.RUNNING, Status.CANCELLED}),
    Status.QUEUED: frozenset({Status.RUNNING, Status.CANCELLED}),
    # -> queued: a retry, a reclaimed lease, or a requeue on shutdown.
    # -> cancelled: its worker ended it after a cancel was asked (cooperative).
    Status.RUNNING: frozenset({Status.SUCCEEDED, Status.FAILED, Status.QUEUED, Status.CANCELLED}),
    # -> queued: a manual retry or a replay.
    Status.FAILED: frozenset({Status.QUEUED}),
    Status.SUCCEEDED: frozenset(),
    Status.CANCELLED: frozenset(),
}


def is_legal(before: Status | None, after: Status) -> bool:
    return after in TRANSITIONS[before]


def check_transition(before: Status | None, after: Status) -> None:
    if not is_legal(before, after):
        raise IllegalTransition(
            f"a job cannot go from {before or 'nothing'} to {after}",
            before=before,
            after=after,
        )
