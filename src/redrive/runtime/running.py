"""One job a worker runs: its lease, its stop signals, and where its run
stands (handled, its lease lost, given up)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from redrive.core.job import Job, Lease
from redrive.core.transitions import Completion, FailNow, Finish, RetryLater
from redrive.runtime.interrupts import Interrupt


@dataclass(eq=False, slots=True)  # one a job: slots make it and read it faster
class Running:
    job: Job
    lease: Lease  # the job's, built once: the run is keyed, fenced and released by it
    interrupt: Interrupt
    # When the lease was last known good (monotonic): asked for at claim or
    # at the last heartbeat that extended it. A whole TTL past it, the
    # lease may be another worker's.
    extended_at: float
    future: asyncio.Future | None = None
    finishing: bool = False  # the handler is done; its write is queued or under way
    lost: bool = False  # the lease is gone, or was not extended for a whole TTL
    abandoned: bool = False  # given up (shutdown, lease lost); any outcome is dropped


def queue_wait(job: Job, lease_ttl: timedelta) -> float:
    """Seconds from when the job was due to when this attempt's lease was
    taken, both on the database's clock."""
    if job.lease_expires_at is None:
        return 0.0
    # (one difference of times, not two: a worker asks this of every job)
    return max(0.0, (job.lease_expires_at - job.run_at).total_seconds() - lease_ttl.total_seconds())


def traced_outcome(item: Finish) -> tuple[str, str | None]:
    match item:
        case Completion():
            return "succeeded", None
        case RetryLater():
            return "retry", item.error_code
        case FailNow():
            return "failed", item.error_code
    return "cancelled", None
