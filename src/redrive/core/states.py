"""Job states and the one table of legal transitions."""

from __future__ import annotations

from enum import StrEnum

from redrive.errors import IllegalTransition


class Status(StrEnum):
    PENDING = "pending"  # a workflow step waiting for its parents to end
    BLOCKED = "blocked"  # a workflow step a parent's failure (or cancel) holds until that parent is retried
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


# Jobs in these states live in the hot table the claim reads; the rest move to
# the history table in the same statement that finishes them.
ACTIVE = frozenset({Status.PENDING, Status.BLOCKED, Status.SCHEDULED, Status.QUEUED, Status.RUNNING})
# As a queue's counts are shown: a workflow's pending and blocked steps are
# not in their queue yet (nothing can claim them); the workflow shows them.
ACTIVE_ORDER = (Status.SCHEDULED, Status.QUEUED, Status.RUNNING)
TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED})

# ``None`` is "not yet a job": enqueue creates a job in one of its targets.
# A due ``scheduled`` job is claimed directly: promoting it to ``queued`` first
# would cost a write per job and tell nobody anything.
TRANSITIONS: dict[Status | None, frozenset[Status]] = {
    None: frozenset({Status.PENDING, Status.SCHEDULED, Status.QUEUED}),
    # a step is released by its last parent's ending (-> queued) or held by a
    # parent's failure (-> blocked); a retry of that parent makes it wait again
    Status.PENDING: frozenset({Status.QUEUED, Status.BLOCKED, Status.CANCELLED}),
    Status.BLOCKED: frozenset({Status.PENDING, Status.QUEUED, Status.CANCELLED}),
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
