"""Workflows in memory: a workflow's steps and edges created with it, what a
step reads of its parents, its counts, and its cancel. Edges are resolved
where every job changes status (``state.Kept._move``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from redrive.core.states import ACTIVE, Status
from redrive.core.transitions import Completion, Finish, Finished
from redrive.core.workflow import EdgeState, NewWorkflow, Upstream, WorkflowCreated, WorkflowState
from redrive.errors import ConfigError
from redrive.store.memory.reads import Reading
from redrive.store.memory.state import Step, WorkflowRow
from redrive.store.reads import Page, decode_cursor, encode_cursor, page_size, paged


class Workflows(Reading):
    def jobs_finish(self, items: Sequence[Finish]) -> list[Finished]:
        # Under the one lock: the workflows a success spawned are created with
        # it, and a write refused (its lease lost) creates none.
        with self._lock:
            written = super().jobs_finish(items)
            for done in written:
                if type(done.item) is Completion and done.item.spawned:
                    for spawned in done.item.spawned:
                        self.workflow_insert(workflow=spawned)
            return written

    def workflow_insert(self, *, workflow: NewWorkflow, conn: Any = None) -> WorkflowCreated:
        if conn is not None:
            raise ConfigError("the memory store has no transactions to join")
        with self._lock:
            if workflow.key is not None:
                for row in self._workflows.values():
                    if (row.key, row.owner) == (workflow.key, workflow.owner):
                        return WorkflowCreated(row.id, duplicate=True, steps=self._step_ids(row.id))
            if workflow.id in self._workflows:
                raise ConfigError(f"a workflow with id {workflow.id} already exists")
            self.jobs_insert(jobs=[step.job for step in workflow.steps])
            parents = workflow.parents()
            for step in workflow.steps:
                self._steps[step.job.id] = Step(workflow.id, step.name, step.position, parents.get(step.job.id, 0))
            for edge in workflow.edges:
                self._edges.setdefault(edge.parent, {})[edge.child] = [edge.policy.value, EdgeState.PENDING.value]
            self._workflows[workflow.id] = WorkflowRow(
                workflow.id, workflow.name, workflow.owner, workflow.key,
                {name: list(after) for name, after in workflow.graph.items()}, self._clock(),
                spawned_by=workflow.spawned_by, open_steps=len(workflow.steps))
            return WorkflowCreated(workflow.id, duplicate=False, steps=self._step_ids(workflow.id))

    def _step_ids(self, workflow_id: UUID) -> dict[str, tuple[UUID, ...]]:
        named: dict[str, list[tuple[int, UUID]]] = {}
        for job_id, step in self._steps.items():
            if step.workflow_id == workflow_id:
                named.setdefault(step.name, []).append((step.position or 0, job_id))
        return {name: tuple(job_id for _, job_id in sorted(ids)) for name, ids in named.items()}

    def workflow_steps(self, *, id: UUID) -> dict[str, tuple[UUID, ...]]:
        with self._lock:
            return self._step_ids(id)

    def workflow_get(self, *, id: UUID) -> WorkflowState | None:
        with self._lock:
            row = self._workflows.get(id)
            if row is None:
                return None
            counts: dict[str, dict[Status, int]] = {name: {} for name in row.graph}
            for job_id, step in self._steps.items():
                if step.workflow_id == id and (job := self._jobs.get(job_id)) is not None:
                    by_status = counts.setdefault(step.name, {})
                    by_status[job.status] = by_status.get(job.status, 0) + 1
            return WorkflowState(row.id, row.name, row.owner, row.key, row.created_at, row.cancelled_at,
                                 row.cancelled_by, {k: [(p[0], p[1]) for p in v] for k, v in row.graph.items()}, counts,
                                 row.spawned_by)

    def workflows_page(self, *, owner: str | None = None, after: str | None = None,
                       limit: int = 50) -> Page[WorkflowState]:
        size, key = page_size(limit), decode_cursor(after, 2)
        with self._lock:
            rows = sorted((r for r in self._workflows.values() if owner is None or r.owner == owner),
                          key=lambda r: (r.created_at, r.id), reverse=True)
            if key is not None:
                last = (datetime.fromisoformat(key[0]), UUID(key[1]))
                rows = [r for r in rows if (r.created_at, r.id) < last]
            page = paged(rows[:size + 1], size, lambda r: encode_cursor(r.created_at.isoformat(), str(r.id)))
            return Page([found for r in page.items if (found := self.workflow_get(id=r.id)) is not None],
                        page.next_cursor)

    def workflow_jobs(self, *, id: UUID, statuses: Sequence[Status] = ()) -> list[UUID]:
        with self._lock:
            return [job_id for job_id, step in self._steps.items()
                    if step.workflow_id == id and (job := self._jobs.get(job_id)) is not None
                    and (not statuses or job.status in statuses)]

    def workflow_cancel(self, *, id: UUID, by: str) -> bool:
        """Marks the workflow cancelled (the first asker's is kept) and ends
        every step not ended: waiting ones now, running ones on request."""
        with self._lock:
            row = self._workflows.get(id)
            if row is None:
                return False
            if row.cancelled_at is None:
                row.cancelled_at, row.cancelled_by = self._clock(), by
            self.jobs_cancel(job_ids=self.workflow_jobs(id=id, statuses=tuple(ACTIVE)), by=by)
            return True

    def step_parents(self, *, job_id: UUID) -> list[Upstream]:
        with self._lock:
            found = []
            for parent, children in self._edges.items():
                if job_id in children and (job := self._jobs.get(parent)) is not None:
                    step = self._steps[parent]
                    found.append(Upstream(parent, step.name, step.position, job.status,
                                          job.result if job.status is Status.SUCCEEDED else None,
                                          job.error_code or job.last_error_code))
            return sorted(found, key=lambda u: (u.name, u.position or 0))
