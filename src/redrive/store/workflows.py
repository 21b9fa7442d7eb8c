"""What a store keeps of workflows beside their jobs (core/workflow.py):
creating one with its steps and edges in one transaction, reading its
counts and its steps, and cancelling it. Resolving an edge is part of every
store's endings (``Store.jobs_finish``, ``jobs_cancel``, ``jobs_revive``),
and what a running step reads of its parents is ``Store.step_parents``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
from uuid import UUID

from redrive.core.states import Status
from redrive.core.workflow import NewWorkflow, WorkflowCreated, WorkflowState
from redrive.store.reads import Page


class Workflows(Protocol):
    def workflow_insert(self, *, workflow: NewWorkflow, conn: Any = None) -> WorkflowCreated:
        """Create the workflow, its steps (jobs: a step with parents pending)
        and its edges in one transaction (``conn``: the caller's, as for
        ``jobs_insert``); a workflow whose key (with its owner) is taken
        creates nothing and answers the one that holds it, ``duplicate``."""

    def workflow_get(self, *, id: UUID) -> WorkflowState | None:
        """The workflow and its steps' counts by step name and status."""

    def workflows_page(self, *, owner: str | None = None, after: str | None = None,
                       limit: int = 50) -> Page[WorkflowState]:
        """The newest workflows (``owner``'s only, when given), newest first,
        a page past ``after`` (the last page's ``next_cursor``); their steps'
        counts read in one query for the page."""

    def workflow_steps(self, *, id: UUID) -> dict[str, tuple[UUID, ...]]:
        """The job ids of each step by name, a fan-out's in the order declared."""

    def workflow_jobs(self, *, id: UUID, statuses: Sequence[Status] = ()) -> list[UUID]:
        """The ids of the workflow's steps (in ``statuses`` if given)."""

    def workflow_cancel(self, *, id: UUID, by: str) -> bool:
        """Mark the workflow cancelled (the first asker kept) and cancel every
        step not ended, as ``jobs_cancel`` does (a running one on request).
        False when there is no such workflow."""
