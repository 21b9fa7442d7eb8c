"""Work that spans jobs, as values: a workflow's steps (each a job), the
edges between them, and the two rules every store applies when a step ends.

A step with parents is created ``pending``: invisible to the claim, spending
no attempt. Each edge is resolved once, by the transaction that gives its
parent a final ending (succeeded, failed, cancelled; a retry scheduled is not
final): its ``policy`` says whether that ending lets the child run
(``satisfied``) or holds it (``blocking``). The child keeps two counts, the
parents not yet ended and the parents blocking it; ``step_status`` turns them
into its status, so the parent whose ending takes the last count to zero is
the one that releases it, by an update of the child's own row. A retry or a
replay of a blocking parent gives the edge back (``pending``) in the
transaction that revives the parent, and the child waits again.

Pure: no I/O, no clock (docs/workflows.md says why the edge is decided here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from uuid import UUID

from redrive.core.job import NewJob
from redrive.core.states import Status
from redrive.errors import ConfigError


class Policy(StrEnum):
    """What an edge asks of its parent's final ending before the child may run."""

    SUCCEEDED = "succeeded"  # the default: the parent succeeded; a failure or a cancel blocks the child
    NOT_FAILED = "not_failed"  # succeeded, or cancelled (a cancelled parent is ignored); a failure blocks
    ENDED = "ended"  # any final ending: a "finally" step


class EdgeState(StrEnum):
    PENDING = "pending"  # its parent has not ended (or was revived)
    SATISFIED = "satisfied"
    BLOCKING = "blocking"


def edge_state(policy: Policy | str, parent: Status | str) -> EdgeState:
    """What a parent's final ending makes of an edge out of it."""
    policy, parent = Policy(policy), Status(parent)
    if parent is Status.SUCCEEDED or policy is Policy.ENDED:
        return EdgeState.SATISFIED
    if parent is Status.CANCELLED and policy is Policy.NOT_FAILED:
        return EdgeState.SATISFIED
    if parent in (Status.FAILED, Status.CANCELLED):
        return EdgeState.BLOCKING
    raise ConfigError(f"an edge is resolved only by a final ending, not {parent}")


def step_status(waiting: int, blocking: int) -> Status:
    """A step's status from its parents not yet ended and its parents blocking it."""
    if blocking > 0:
        return Status.BLOCKED
    return Status.PENDING if waiting > 0 else Status.QUEUED


@dataclass(frozen=True, slots=True)
class NewStep:
    """A step to create: its job, its name in the workflow, and its place in
    a fan-out (``None`` for a step of its own)."""

    job: NewJob
    name: str
    position: int | None = None


@dataclass(frozen=True, slots=True)
class NewEdge:
    parent: UUID  # job ids
    child: UUID
    policy: Policy = Policy.SUCCEEDED


@dataclass(frozen=True, slots=True)
class NewWorkflow:
    """What a workflow's creation asks the store for, all in one transaction.
    ``graph``: each step name's parents by name and policy, kept to draw it."""

    id: UUID
    name: str
    steps: tuple[NewStep, ...]
    edges: tuple[NewEdge, ...]
    graph: Mapping[str, Sequence[tuple[str, str]]]
    owner: str | None = None
    key: str | None = None
    spawned_by: UUID | None = None  # the job whose successful ending created it (``redrive.spawn``)

    def parents(self) -> dict[UUID, int]:
        """How many parents each step waits on (steps without any are left out)."""
        count: dict[UUID, int] = {}
        for edge in self.edges:
            count[edge.child] = count.get(edge.child, 0) + 1
        return count


@dataclass(frozen=True, slots=True)
class WorkflowCreated:
    """The workflow a creation made, or the one its key already named (``duplicate``)."""

    id: UUID
    duplicate: bool
    steps: Mapping[str, tuple[UUID, ...]] = field(default_factory=dict)  # name -> job ids, fan-out in order


@dataclass(frozen=True, slots=True)
class Upstream:
    """One parent of a running step, as the step reads it: its step name, its
    place in a fan-out, how it ended and its result (None unless it succeeded)."""

    job_id: UUID
    name: str
    position: int | None
    status: Status
    result: object
    error_code: str | None = None


@dataclass(frozen=True, slots=True)
class WorkflowChange:
    """What a step's ending did to its workflow, decided in that ending's
    transaction and so told once: ``became`` succeeded, failed or cancelled
    (the last step not ended has ended) or blocked (the ending blocked
    ``blocked`` steps of it, which wait until it is retried)."""

    workflow_id: UUID
    name: str
    became: str
    blocked: int = 0

    def __post_init__(self) -> None:
        if self.became not in WORKFLOW_CHANGES:
            raise ConfigError(f"a workflow becomes one of {', '.join(WORKFLOW_CHANGES)}, not {self.became!r}")


WORKFLOW_CHANGES = ("succeeded", "failed", "cancelled", "blocked")


def ended_as(statuses: Sequence[Status | str], *, cancelled: bool) -> str:
    """How a workflow whose every step has ended ended: failed if one failed,
    cancelled if it was cancelled or one was, else succeeded (``workflow_status``)."""
    seen = {Status(s) for s in statuses}
    if Status.FAILED in seen:
        return "failed"
    return "cancelled" if cancelled or Status.CANCELLED in seen else "succeeded"


# The order a workflow's statuses are shown in, and its own statuses.
STEP_ORDER: tuple[Status, ...] = (Status.PENDING, Status.BLOCKED, Status.SCHEDULED, Status.QUEUED,
                                  Status.RUNNING, Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)


class WorkflowStatus(StrEnum):
    RUNNING = "running"  # a step is due or running
    BLOCKED = "blocked"  # nothing can run until a failed step is retried (or the workflow cancelled)
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # every step ended and one failed (reached through a "finally" edge)
    CANCELLED = "cancelled"


def workflow_status(counts: Mapping[Status, int], *, cancelled: bool) -> WorkflowStatus:
    """A workflow's status from its steps' counts by status."""
    def some(*statuses: Status) -> bool:
        return any(counts.get(s, 0) for s in statuses)

    if some(Status.SCHEDULED, Status.QUEUED, Status.RUNNING):
        return WorkflowStatus.RUNNING
    if cancelled:
        return WorkflowStatus.CANCELLED
    if some(Status.BLOCKED, Status.PENDING):
        # pending with nothing running: it waits on a blocked step
        return WorkflowStatus.BLOCKED
    if some(Status.FAILED):
        return WorkflowStatus.FAILED
    return WorkflowStatus.CANCELLED if some(Status.CANCELLED) else WorkflowStatus.SUCCEEDED


@dataclass(frozen=True, slots=True)
class WorkflowState:
    """A workflow as stored: its graph by step name, and its steps' counts
    by step name and status (a fan-out of thousands is one name)."""

    id: UUID
    name: str
    owner: str | None
    key: str | None
    created_at: datetime
    cancelled_at: datetime | None
    cancelled_by: str | None
    graph: Mapping[str, Sequence[tuple[str, str]]]
    counts: Mapping[str, Mapping[Status, int]]
    spawned_by: UUID | None = None

    @property
    def totals(self) -> dict[Status, int]:
        out: dict[Status, int] = {}
        for by_status in self.counts.values():
            for status, n in by_status.items():
                out[status] = out.get(status, 0) + n
        return out

    @property
    def status(self) -> WorkflowStatus:
        return workflow_status(self.totals, cancelled=self.cancelled_at is not None)

    @property
    def progress(self) -> float:
        """Its steps' progress: the share of them that have ended (1.0 for none)."""
        totals = self.totals
        steps = sum(totals.values())
        ended = sum(totals.get(s, 0) for s in (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED))
        return ended / steps if steps else 1.0


def check_graph(graph: Mapping[str, Sequence[tuple[str, str]]]) -> None:
    """Every parent named is a step, and no step waits on itself through any path."""
    for name, parents in graph.items():
        for parent, policy in parents:
            if parent not in graph:
                raise ConfigError(f"step {name!r} runs after {parent!r}, which is not a step of this workflow")
            if policy not in Policy.__members__.values():
                raise ConfigError(f"step {name!r}: an edge's policy is one of {', '.join(Policy)}, not {policy!r}")
    # Kahn's order, not a recursive walk: a chain of thousands of steps is legal
    waiting = {name: len(parents) for name, parents in graph.items()}
    children: dict[str, list[str]] = {}
    for name, parents in graph.items():
        for parent, _ in parents:
            children.setdefault(parent, []).append(name)
    ready = [name for name, n in waiting.items() if n == 0]
    while ready:
        for child in children.get(ready.pop(), ()):
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    if circle := sorted(name for name, n in waiting.items() if n > 0):
        raise ConfigError(f"a workflow's steps may not wait on each other in a circle: {', '.join(circle[:5])}")
