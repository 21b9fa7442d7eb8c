"""What an operator (or a workflow's owner) does to a workflow: read it,
cancel it whole, retry every failed step in it. The rules of who may are
``actor``'s, as for a job: a workflow belongs to its owner."""

from __future__ import annotations

from uuid import UUID

from redrive.admin.jobs import JobActions
from redrive.core import checks
from redrive.core.job import Job
from redrive.core.states import Status
from redrive.core.workflow import WorkflowState
from redrive.errors import Forbidden, WorkflowNotFound
from redrive.store.reads import Page, page_size


class WorkflowActions(JobActions):
    def workflow(self, workflow_id: UUID | str) -> WorkflowState:
        """A workflow, its status and its steps' counts by name and status."""
        found = self.store.workflow_get(id=checks.workflow_uuid(workflow_id))
        if found is None:
            raise WorkflowNotFound(f"no workflow has id {workflow_id}")
        if not self.actor.is_operator and found.owner != self.actor.owner:
            raise Forbidden(f"workflow {found.id} belongs to someone else; only its owner or an operator may act on it")
        return found

    def workflow_steps(self, workflow_id: UUID | str) -> dict[str, tuple[UUID, ...]]:
        """The job ids of each of the workflow's steps by name (a fan-out's in the order declared)."""
        return self.store.workflow_steps(id=self.workflow(workflow_id).id)

    def workflows(self, *, owner: str | None = None, after: str | None = None,
                  limit: int = 50) -> Page[WorkflowState]:
        """The newest workflows (``owner``'s, when given), newest first, a page
        past ``after`` (the last page's ``next_cursor``): an owner sees their own."""
        if not self.actor.is_operator:
            if owner is not None and owner != self.actor.owner:
                raise Forbidden("an owner may list only their own workflows")
            owner = self.actor.owner
        return self.store.workflows_page(owner=owner, after=after, limit=page_size(limit))

    def cancel_workflow(self, workflow_id: UUID | str) -> WorkflowState:
        """Nothing in the workflow starts afterwards: its waiting steps end
        cancelled now and its running ones are asked to stop (as ``cancel``
        asks); the workflow ends ``cancelled``."""
        self._acting("cancel a workflow", operator=False)
        workflow = self.workflow(workflow_id)
        self.store.workflow_cancel(id=workflow.id, by=self.actor.name)
        return self.workflow(workflow.id)

    def retry_workflow(self, workflow_id: UUID | str) -> list[Job]:
        """Every failed step queued again (a manual retry of each, in one
        write); the steps their failures blocked wait for them again, and
        nothing that succeeded runs again. Answers the steps retried."""
        self._acting("retry a workflow", operator=False)
        workflow = self.workflow(workflow_id)
        failed = [job for job_id in self.store.workflow_jobs(id=workflow.id, statuses=(Status.FAILED,))
                  if (job := self.store.job_get(job_id=job_id)) is not None]
        return [job for job in self._revive(failed) if job is not None] if failed else []
