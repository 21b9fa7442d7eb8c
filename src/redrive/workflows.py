"""Declaring work that spans jobs: a ``Workflow`` of steps, each a task's
call (``task.call(...)``), with ``after=`` edges between them.

    wf = Workflow("digest", key=f"digest-{day}")
    page = wf.add(fetch.call(url))
    parts = wf.map((embed.call(p) for p in paragraphs), after=page)   # a fan-out
    wf.add(summarize.call(), after=parts)                             # its join: runs once, after all
    app.create_workflow(wf)

``Workflow.chain`` is the shortcut for steps in a line. A step is a job and
keeps every job feature (its task's queue, retries, time limits, stages,
breakers and limits); it reads its parents' endings and results with
``redrive.parents()`` and ``redrive.parent_results()``. What the edges
promise, and what this takes from Celery, Oban, Hatchet and Temporal and
what it refuses, is in docs/workflows.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from redrive.core import checks
from redrive.core.job import NewJob
from redrive.core.workflow import NewEdge, NewStep, NewWorkflow, Policy, check_graph
from redrive.declarations import Call
from redrive.errors import ConfigError

# Edges a workflow may hold: a fan-out after a fan-out is every member after
# every member; past this, put a join step between them.
MAX_EDGES = 1_000_000


@dataclass(frozen=True, slots=True)
class StepRef:
    """A step added to a workflow (for a fan-out: all of its members)."""

    name: str


@dataclass(frozen=True, slots=True)
class After:
    """An edge with a policy other than the default: ``After(step, "ended")``
    runs the child whatever the parent's ending (a "finally" step);
    ``"not_failed"`` runs it unless the parent failed (a cancelled parent is
    ignored). The default, ``"succeeded"``, is what a bare ``after=step`` says."""

    step: StepRef | str
    policy: Policy | str = Policy.SUCCEEDED

    def __post_init__(self) -> None:
        if self.policy not in Policy.__members__.values():
            raise ConfigError(f"an edge's policy is one of {', '.join(Policy)}, not {self.policy!r}")


Parents = StepRef | str | After | Sequence[StepRef | str | After]


@dataclass(slots=True)
class _Declared:
    calls: list[Call]
    fan_out: bool
    after: list[tuple[str, str]] = field(default_factory=list)


class Workflow:
    """Steps and the edges between them, created in one transaction by
    ``Client.create_workflow`` (``app.create_workflow``). ``key``: the same
    key (for the same owner) from any number of processes creates one
    workflow; ``owner``: the principal its steps belong to, as a job's."""

    def __init__(self, name: str, *, key: str | None = None, owner: str | None = None) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("a workflow's name must be a non-empty string")
        if key is not None and (not isinstance(key, str) or not key.strip()):
            raise ConfigError("a workflow's key must be a non-empty string")
        self.name = checks.text(name, "a workflow's name")
        self.key = None if key is None else checks.text(key, "a workflow's key")
        self.owner = checks.owner(owner)
        self._steps: dict[str, _Declared] = {}

    @classmethod
    def chain(cls, name: str, calls: Sequence[Call], *, key: str | None = None,
              owner: str | None = None) -> Workflow:
        """Each call runs after the one before it succeeded."""
        workflow = cls(name, key=key, owner=owner)
        previous: StepRef | None = None
        for call in calls:
            previous = workflow.add(call, after=() if previous is None else previous)
        return workflow

    def add(self, call: Call, *, name: str | None = None, after: Parents = ()) -> StepRef:
        """One step, after ``after`` (steps, their names, or ``After`` edges)."""
        return self._declare([call], name, after, fan_out=False)

    def map(self, calls: Iterable[Call], *, name: str | None = None, after: Parents = ()) -> StepRef:
        """A fan-out: one step per call, all after ``after``. A step after it
        waits for every member; an empty fan-out lets it run at once."""
        return self._declare(list(calls), name, after, fan_out=True)

    def _declare(self, calls: list[Call], name: str | None, after: Parents, *, fan_out: bool) -> StepRef:
        for call in calls:
            if not isinstance(call, Call):
                raise ConfigError("a step is a task's call: task.call(...) or task.options(...).call(...)")
        if name is None:
            if not calls:
                raise ConfigError("an empty fan-out needs a name=")
            name = self._free_name(calls[0].task.name)
        elif not isinstance(name, str) or not name.strip():
            raise ConfigError("a step's name must be a non-empty string")
        if name in self._steps:
            raise ConfigError(f"this workflow has a step named {name!r} already")
        self._steps[checks.text(name, "a step's name")] = _Declared(calls, fan_out, self._edges(after))
        return StepRef(name)

    def _free_name(self, base: str) -> str:
        name, n = base, 1
        while name in self._steps:
            n += 1
            name = f"{base}-{n}"
        return name

    def _edges(self, after: Parents) -> list[tuple[str, str]]:
        items = [after] if isinstance(after, StepRef | str | After) else list(after)
        edges = []
        for item in items:
            step, policy = (item.step, Policy(item.policy)) if isinstance(item, After) else (item, Policy.SUCCEEDED)
            parent = step.name if isinstance(step, StepRef) else step
            if parent not in self._steps:
                raise ConfigError(f"a step runs after {parent!r}, which is not a step of this workflow (yet)")
            edges.append((parent, policy.value))
        return edges

    @property
    def graph(self) -> dict[str, list[tuple[str, str]]]:
        """Each step's parents, by name and policy."""
        return {name: list(step.after) for name, step in self._steps.items()}

    def steps(self) -> list[tuple[str, bool, list[Call]]]:
        """Each step's name, whether it is a fan-out, and its calls, in the order added."""
        return [(name, step.fan_out, list(step.calls)) for name, step in self._steps.items()]

    def check(self) -> None:
        if not self._steps:
            raise ConfigError("a workflow needs at least one step")
        check_graph(self.graph)
        edges = sum(len(self._steps[parent].calls) * len(step.calls)
                    for step in self._steps.values() for parent, _ in step.after)
        if edges > MAX_EDGES:
            raise ConfigError(f"this workflow would hold {edges:,} edges (at most {MAX_EDGES:,}): "
                              "put a join step between two fan-outs")


def build(workflow: Workflow, id: UUID, job_for: Callable[[Call], NewJob], *, owner: str | None = None,
          spawned_by: UUID | None = None) -> NewWorkflow:
    """What the store is asked to create for ``workflow``: each call's job
    (``job_for``; pending where it has parents), its steps and its edges;
    ``owner``: the workflow's (its own, else its spawner's)."""
    workflow.check()
    jobs: dict[str, list[NewJob]] = {}
    steps: list[NewStep] = []
    edges: list[NewEdge] = []
    for name, fan_out, calls in workflow.steps():
        after = workflow.graph[name]
        made = jobs[name] = []
        for position, call in enumerate(calls):
            job = job_for(call)
            job.waits = any(jobs[parent] for parent, _ in after)
            made.append(job)
            steps.append(NewStep(job, name, position if fan_out else None))
            edges += (NewEdge(parent.id, job.id, Policy(policy)) for p, policy in after for parent in jobs[p])
    return NewWorkflow(id, workflow.name, tuple(steps), tuple(edges), workflow.graph, owner, workflow.key,
                       spawned_by)
