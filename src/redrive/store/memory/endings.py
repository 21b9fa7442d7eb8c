"""Every state change of a job after its enqueue, in memory: endings (a
worker's, and the reclaim's), stages saved, cancels and revivals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from uuid import UUID

from redrive.core.dead_letters import Revival, cancel_meta, distinct_jobs, escalates, fail_meta, retry_meta
from redrive.core.job import DeadLetter, Job, Lease, StageDone
from redrive.core.progress import Progress
from redrive.core.rollups import rollup_tally
from redrive.core.states import TERMINAL, Status
from redrive.core.transitions import (
    Cancellation,
    Completion,
    FailNow,
    Finish,
    Finished,
    Requeue,
    RetryLater,
    ends_as,
    taken_back,
)
from redrive.store.memory.state import Kept, _counts


class Endings(Kept):
    def jobs_finish(self, items: Sequence[Finish]) -> list[Finished]:
        with self._lock:
            now = self._clock()
            written = []
            self._changes = {}
            for item in items:
                if job := self._live(item.lease):
                    finished = self._finish(job, item, now)
                    if self._changes:  # what the ending did to its workflow, told with it
                        finished.workflows = tuple(self._changes.pop(job.id, ()))
                    written.append(finished)
            rolled = self._rolled(written, now)
        self._tell_woken()
        return rolled

    def _rolled(self, written: list[Finished], now: datetime) -> list[Finished]:
        minute = int(now.timestamp()) // 60 * 60
        for (queue, task, kind, bucket), n in rollup_tally(written).items():
            key = (minute, queue, task, kind, bucket)
            self._rollups[key] = self._rollups.get(key, 0) + n
        return written

    def _finish(self, job: Job, item: Finish, now: datetime) -> Finished:
        match item:
            case Completion():
                self._move(job, Status.SUCCEEDED, now, result=item.result, finished_at=now,
                           meta=dict(item.meta), **self._NO_LEASE)
            case RetryLater():
                stage = item.stage or job.stage
                failed = dict(last_error_code=item.error_code, last_error_message=item.error_message, stage=stage,
                              stage_attempts=_counts(item.stage_attempts, job),
                              first_failed_at=job.first_failed_at or now, **self._NO_LEASE)
                status, by = ends_as(item, cancel_asked_by=self._cancel_requests.pop(job.id, None))
                if status is Status.CANCELLED and by is not None:  # a cancel asked while it ran wins, the error kept
                    self._move(job, Status.CANCELLED, now, finished_at=now, **failed, meta=cancel_meta(
                        by=by, error_code=item.error_code, stage=stage, extra=item.meta))
                    return Finished(item, job.task, job.queue, Status.CANCELLED, job.attempts, stage, cancelled_by=by)
                self._move(job, Status.QUEUED, now, run_at=now + item.delay, **failed,
                           meta=retry_meta(error_code=item.error_code, delay=item.delay, stage=stage, extra=item.meta))
            case FailNow():
                letter = self._fail(job, item, now)
                return Finished(item, job.task, job.queue, Status.FAILED, job.attempts, letter.stage,
                                dead_letter_id=letter.id, escalated=letter.escalated)
            case Cancellation():
                self._cancel_requests.pop(job.id, None)
                self._move(job, Status.CANCELLED, now, finished_at=now, meta={"by": item.by, **item.meta},
                           **self._NO_LEASE)
                return Finished(item, job.task, job.queue, Status.CANCELLED, job.attempts, job.stage,
                                cancelled_by=item.by)
            case Requeue():
                self._move(job, Status.QUEUED, now, run_at=now + item.delay, attempts=job.attempts - item.refund,
                           meta=dict(item.meta), **self._NO_LEASE)
        after = self._jobs[job.id]
        return Finished(item, job.task, job.queue, after.status, job.attempts, after.stage)

    def _cancel_now(self, job: Job, by: str, now: datetime) -> Job:
        return self._move(job, Status.CANCELLED, now, finished_at=now, meta={"by": by})

    def _fail(self, job: Job, item: FailNow, now: datetime) -> DeadLetter:
        error_class = item.error_class or item.error_code
        stage = item.stage or job.stage
        counts = _counts(item.stage_attempts, job)
        first = job.first_failed_at or now
        previous = max((d for d in self._letters.values() if d.job_id == job.id),
                       key=lambda d: d.id, default=None)
        letter = DeadLetter(
            id=len(self._letters) + 1, job_id=job.id, task=job.task, queue=job.queue,
            owner=job.owner, error_class=error_class, error_code=item.error_code,
            error_message=item.error_message, retryable=item.retryable, stage=stage,
            stage_attempts=counts, attempts=job.attempts, last_stack=item.stack,
            context=dict(item.context), first_failure_at=first, last_failure_at=now,
            escalated=escalates(previous_error_class=previous.error_class if previous else None,
                                previous_replayed=bool(previous and previous.replayed_at),
                                error_class=error_class, retryable=item.retryable),
            previous_id=previous.id if previous else None,
            replayed_at=None, replayed_by=None, replay_from=None, notes=[], resolved_at=None, resolved_by=None,
        )
        self._letters[letter.id] = letter
        self._move(
            job, Status.FAILED, now,
            error_code=item.error_code, error_message=item.error_message,
            last_error_code=item.error_code, last_error_message=item.error_message,
            finished_at=now, failed_at=now, stage=stage, stage_attempts=counts,
            first_failed_at=first,
            meta=fail_meta(error_code=item.error_code, error_class=error_class, stage=stage,
                           dead_letter_id=letter.id, escalated=letter.escalated, extra=item.meta),
            **self._NO_LEASE,
        )
        return letter

    def progress_save(self, *, lease: Lease, progress: Progress) -> bool:
        with self._lock:
            if self._live(lease) is None:
                return False
            self._progress[lease.job_id] = replace(progress, at=self._clock())
            return True

    def stages_save(self, *, items: Sequence[StageDone]) -> set[Lease]:
        with self._lock:
            now = self._clock()
            saved = set()
            for item in items:
                if job := self._live(item.lease):
                    self._jobs[job.id] = replace(
                        job, checkpoint={**job.checkpoint, item.stage: item.output},
                        stage_attempts=dict(item.stage_attempts), stage=item.next_stage or item.stage,
                        updated_at=now,
                    )
                    saved.add(item.lease)
            return saved

    def jobs_reclaim(self, *, limit: int = 500, worker_id: str | None = None,
                     bystanders: bool = False) -> list[Finished]:
        with self._lock:
            now = self._clock()
            taken = [
                j for j in self._jobs.values()
                if j.status is Status.RUNNING and (j.lease_owner == worker_id if worker_id is not None else
                                                   j.lease_expires_at is not None and j.lease_expires_at <= now)
            ][:limit]
            self._changes = {}
            written = []
            for job in taken:
                finished = self._finish(job, taken_back(job.lease, job.lease_owner, last=job.attempts >= job.max_attempts,
                                                        crashed=worker_id is not None, bystander=bystanders), now)
                finished.workflows = tuple(self._changes.pop(job.id, ()))
                written.append(finished)
            rolled = self._rolled(written, now)
        self._tell_woken()
        return rolled

    def jobs_cancel(self, *, job_ids: Sequence[UUID], by: str) -> list[Job | None]:
        with self._lock:
            now = self._clock()
            cancelled = [self._cancel_one(job_id, by, now) for job_id in job_ids]
        self._tell_woken()
        return cancelled

    def _cancel_one(self, job_id: UUID, by: str, now: datetime) -> Job | None:
        job = self._jobs.get(job_id)
        if job is None or job.status in TERMINAL:
            return None
        if job.status is Status.RUNNING:
            self._cancel_requests.setdefault(job_id, by)
            return job
        return self._cancel_now(job, by, now)

    def jobs_revive(self, *, revivals: Sequence[Revival]) -> list[Job | None]:
        distinct_jobs(revivals)
        with self._lock:  # one transaction: nothing else sees half the batch
            revived = [self._revive(r) for r in revivals]
            listeners = list(self._listeners)
        for queue in {job.queue for job in revived if job is not None}:
            for on_wake in listeners:
                on_wake(queue)
        return revived

    def _revive(self, revival: Revival) -> Job | None:
        job_id, plan, dead_letter_id = revival.job_id, revival.plan, revival.dead_letter_id
        job = self._jobs.get(job_id)
        if job is None or job.status is not Status.FAILED or job.failed_at != plan.failed_at:
            return None
        letter = self._letters.get(dead_letter_id) if dead_letter_id is not None else None
        if dead_letter_id is not None and (letter is None or letter.job_id != job_id or letter.state != "open"):
            return None
        now = self._clock()
        self._cancel_requests.pop(job_id, None)
        marked = []
        for d in list(self._letters.values()):
            if d.job_id == job_id and d.state == "open":
                self._letters[d.id] = replace(d, replayed_at=now, replayed_by=plan.by, replay_from=plan.replay_from)
                marked.append(d.id)
        # The event records attempt 0: the revived job starts a fresh count.
        return self._move(
            job, Status.QUEUED, now, run_at=now, attempts=0, error_code=None,
            error_message=None, finished_at=None, failed_at=None, first_failed_at=None,
            stage=plan.stage, checkpoint=dict(job.checkpoint) if plan.keep_checkpoint else {},
            stage_attempts=dict(plan.stage_attempts), manual_retry_count=plan.manual_retries,
            meta=plan.meta(marked),
        )
