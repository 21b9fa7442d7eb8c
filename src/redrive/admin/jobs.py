"""The operator API on jobs: read them, their events and audit trail;
reveal their arguments; retry, cancel, delete one, or every one a filter
matches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from uuid import UUID

from redrive.admin.actor import Acting
from redrive.admin.results import BULK_ACTIONS, Bulk
from redrive.client import job_filter, read_job
from redrive.core.dead_letters import MANUAL_RETRY, Revival, revive_plan
from redrive.core.job import Job, JobEvent
from redrive.core.progress import Progress
from redrive.core.states import Status
from redrive.errors import ConfigError, Forbidden, IllegalTransition, JobNotFound
from redrive.store.reads import AuditEntry, Page


class JobActions(Acting):
    def job(self, job_id: UUID | str) -> Job:
        return self._may_touch(read_job(self.store, job_id))

    def jobs(
        self,
        *,
        status: Status | Sequence[Status] | None = None,
        queue: str | None = None,
        task: str | None = None,
        owner: str | None = None,
        error_code: str | None = None,
        idempotency_key: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        after: str | None = None,
        limit: int = 50,
    ) -> Page[Job]:
        """A page of jobs, newest first (``after``: the previous page's
        ``next_cursor``). An owner sees only their own jobs."""
        if not self.actor.is_operator:
            if owner is not None and owner != self.actor.owner:
                raise Forbidden("an owner may list only their own jobs")
            owner = self.actor.owner
        where = job_filter(status=status, queue=queue, task=task, owner=owner, error_code=error_code,
                           idempotency_key=idempotency_key, created_after=created_after,
                           created_before=created_before)
        return self.store.jobs_page(where=where, after=after, limit=limit)

    def reveal(self, job_id: UUID | str) -> Job:
        """The job with what it was given, for a view that shows its original
        arguments (``views.job_view(job, reveal=True)``): operators only, and
        put on record with who looked (the job's audit trail)."""
        self._acting("reveal a job's arguments")
        job = self.job(job_id)
        self.store.audit_record(by=self.actor.name, action="reveal", job_id=job.id, detail={"fields": ["args", "kwargs"]})
        self.events.emit("job.revealed", job_id=str(job.id), task=job.task, queue=job.queue, by=self.actor.name)
        return job

    def audit_trail(self, job_id: UUID | str | None = None) -> list[AuditEntry]:
        """Who revealed what of a job, oldest first; without a job, the
        actions on no one job (queue pauses, bulk actions), the latest 1,000."""
        self._operator_only("read the audit trail")
        return self.store.audits_list(job_id=None if job_id is None else self.job(job_id).id)

    def job_events(self, job_id: UUID | str) -> list[JobEvent]:
        """The job's history, oldest first: one event per state change."""
        job = self.job(job_id)
        return self.store.job_events_list(job_id=job.id)

    def progress(self, job_id: UUID | str) -> Progress | None:
        """The job's latest progress (``redrive.progress``), None if it said none."""
        job = self.job(job_id)
        return self.store.progress_read(job_ids=[job.id]).get(job.id)

    def retry(self, job_id: UUID | str) -> Job:
        """Manual retry of a failed job: queued again with fresh attempts, at the
        stage that failed."""
        self._acting("retry a job", operator=False)
        job = self.job(job_id)
        if job.status is not Status.FAILED:
            raise IllegalTransition(f"job {job.id} is {job.status}; only a failed job can be retried")
        (revived,) = self._revive([job])
        if revived is None:
            raise IllegalTransition(f"job {job.id} was retried or replayed by someone else just now")
        return revived

    def _revive(self, jobs: Sequence[Job]) -> list[Job | None]:
        """Manual retries of failed ``jobs``, in one store call; each one revived announced."""
        revived = self.store.jobs_revive(revivals=[
            Revival(job.id, revive_plan(job, reason=MANUAL_RETRY, by=self.actor.name)) for job in jobs])
        for job in revived:
            if job is not None:
                self.events.emit("job.retried", job_id=str(job.id), task=job.task, queue=job.queue, by=self.actor.name)
        return revived

    def cancel(self, job_id: UUID | str) -> Job:
        """A scheduled or queued job ends ``cancelled`` at once. A running one
        is stopped by its worker within a second or so (an async task is
        cancelled; a sync one sees ``redrive.cancelled()`` turn true) and ends
        ``cancelled`` then: the job returned is still ``running``. Either way
        its events say who cancelled it."""
        self._acting("cancel a job", operator=False)
        job = self.job(job_id)
        (cancelled,) = self._cancel([job])
        if cancelled is None:  # ended (or gone) since it was read
            raise IllegalTransition(f"job {job.id} is {read_job(self.store, job.id).status}; "
                                    "only an unfinished job can be cancelled")
        return cancelled

    def bulk(
        self,
        action: str,
        *,
        dry_run: bool = False,
        status: Status | Sequence[Status] | None = None,
        queue: str | None = None,
        task: str | None = None,
        owner: str | None = None,
        error_code: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        batch: int = 500,
    ) -> Bulk:
        """``action`` ("retry", "cancel" or "delete") on every job the filter
        matches, among those it applies to (retry: failed; cancel: scheduled,
        queued, running; delete: finished), ``batch`` at a time. An owner acts on their own jobs only.
        A job someone else changed meanwhile is skipped. Stopped halfway, the
        same call again finishes the rest: what was done no longer matches.
        One entry on the audit trail with the filter and the counts; a
        ``dry_run`` only counts."""
        self._acting(f"{action} jobs", operator=False)
        if action not in BULK_ACTIONS:
            raise ConfigError(f"a bulk action is {' or '.join(BULK_ACTIONS)}, not {action!r}")
        applies = BULK_ACTIONS[action]
        wanted = job_filter(status=status).statuses or applies
        if not set(wanted) <= set(applies):
            raise ConfigError(f"{action} acts on {', '.join(applies)} jobs, not {', '.join(sorted(set(wanted) - set(applies)))}")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ConfigError("batch must be a positive integer")
        if not self.actor.is_operator:
            if owner is not None and owner != self.actor.owner:
                raise Forbidden("an owner may act only on their own jobs")
            owner = self.actor.owner
        where = job_filter(status=list(wanted), queue=queue, task=task, owner=owner, error_code=error_code,
                           created_after=created_after, created_before=created_before)
        matched = done = 0
        after = None
        while True:
            page = self.store.jobs_page(where=where, after=after, limit=batch)
            matched += len(page.items)
            if not dry_run and action == "delete":
                done += len(self._delete([self._may_touch(job) for job in page.items], on_record=False))
            elif not dry_run and action == "retry":  # a page in one call; one retried meanwhile is skipped
                done += sum(job is not None for job in self._revive([self._may_touch(job) for job in page.items]))
            elif not dry_run:
                done += sum(job is not None for job in self._cancel([self._may_touch(job) for job in page.items]))
            if page.next_cursor is None:
                break
            after = page.next_cursor
        result = Bulk(action, matched, done, matched - done if not dry_run else 0, dry_run)
        if not dry_run:
            described = {k: (v.isoformat() if isinstance(v, datetime) else list(v) if isinstance(v, tuple) else v)
                         for k, v in asdict(where).items() if v is not None}
            self.store.audit_record(by=self.actor.name, action=f"bulk_{action}",
                                    detail={"filter": described, "count": done, "skipped": result.skipped})
        return result

    def delete(self, job_id: UUID | str) -> None:
        """Delete a finished job now, with its events, dead letters and keys
        (an idempotency key can then be used afresh), as a prune would; on
        the audit trail. A job still waiting or running is refused (cancel it)."""
        self._acting("delete a job", operator=False)
        job = self.job(job_id)
        if job.status not in BULK_ACTIONS["delete"]:
            raise IllegalTransition(f"job {job.id} is {job.status}; only a finished job can be deleted (cancel it first)")
        if not self._delete([job]):
            raise JobNotFound(f"no job has id {job.id}")

    def _delete(self, jobs: list[Job], *, on_record: bool = True) -> list[UUID]:
        """``on_record``: an entry per job (a bulk delete writes one for all)."""
        gone = self.store.jobs_delete(job_ids=[job.id for job in jobs])
        about = {job.id: job for job in jobs}
        for job_id in gone if on_record else ():
            self.store.audit_record(by=self.actor.name, action="delete", job_id=job_id,
                                    detail={"task": about[job_id].task, "status": str(about[job_id].status)})
        return gone

    def _cancel(self, jobs: Sequence[Job]) -> list[Job | None]:
        """Cancels of ``jobs``, in one store call; each one announced (None: ended or gone meanwhile)."""
        done = self.store.jobs_cancel(job_ids=[job.id for job in jobs], by=self.actor.name)
        for cancelled in done:
            if cancelled is not None:
                about = {"job_id": str(cancelled.id), "task": cancelled.task, "queue": cancelled.queue,
                         "by": self.actor.name}
                self.events.emit("job.cancelled" if cancelled.status is Status.CANCELLED else "job.cancel_requested",
                                 **about)
        return done
