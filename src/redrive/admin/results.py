"""What the operator API's actions answer: a breaker as an operator sees it,
and what an action on many jobs or letters did."""

from __future__ import annotations

from dataclasses import dataclass

from redrive.core.breaker import Breaker, time_open
from redrive.core.job import DeadLetter, Job
from redrive.core.states import Status


@dataclass(frozen=True, slots=True)
class BreakerStatus:
    """One breaker as an operator sees it, read at the database's clock."""

    name: str
    breaker: Breaker
    at: float  # the database's clock when read (epoch seconds)

    @property
    def state(self) -> str:
        return self.breaker.state.value

    @property
    def seconds_open(self) -> float:
        return time_open(self.breaker, self.at)


# What each bulk action applies to.
BULK_ACTIONS: dict[str, tuple[Status, ...]] = {
    "retry": (Status.FAILED,),
    "cancel": (Status.SCHEDULED, Status.QUEUED, Status.RUNNING),
    "delete": (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED),
}


@dataclass(frozen=True, slots=True)
class Bulk:
    """What an action on every job a filter matched did (or, dry, would do)."""

    action: str
    matched: int  # jobs the filter matched, of those the action applies to
    done: int  # acted on: 0 on a dry run
    skipped: int  # changed by someone else between the listing and the action
    dry_run: bool


@dataclass(frozen=True, slots=True)
class Replay:
    """What replaying one dead letter did."""

    letter: DeadLetter
    job: Job | None  # the queued job; None when the letter had been replayed already

    @property
    def replayed(self) -> bool:
        return self.job is not None


@dataclass(frozen=True, slots=True)
class Resolve:
    """What resolving one dead letter did."""

    letter: DeadLetter  # as it now stands
    resolved: bool  # closed by this call; False when it had been replayed or resolved already


