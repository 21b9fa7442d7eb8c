"""Every state change of a job after its enqueue: endings (a worker's, and
the reclaim's), stages saved, cancels and revivals (manual retries, dead
letters replayed), each batch in one transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from redrive.core.dead_letters import Revival, cancel_meta, distinct_jobs, escalates, fail_meta, retry_meta
from redrive.core.job import Job, Lease, StageDone
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
    by_reclaim,
    ends_as,
    taken_back,
)
from redrive.core.workflow import WorkflowChange
from redrive.store.sqlite.codecs import _NO_LEASE, _epoch, _job, _lease
from redrive.store.sqlite.edges import Edges


def _ended(written: Iterable[Finished]) -> list[tuple[str, str]]:
    """The jobs a batch gave a final ending, and how they ended: their edges resolve now."""
    return [(str(f.lease.job_id), f.status.value) for f in written if f.status in TERMINAL]


def _tell(written: Iterable[Finished], changes: dict[str, list[WorkflowChange]]) -> None:
    """Each workflow change on the ending that made it."""
    if changes:
        for finished in written:
            if found := changes.get(str(finished.lease.job_id)):
                finished.workflows = tuple(found)


class Endings(Edges):
    def jobs_finish(self, items: Sequence[Finish]) -> list[Finished]:
        if not items:
            return []

        def body(conn: sqlite3.Connection, now: float) -> dict[Lease, Finished]:
            done = [item for item in items if type(item) is Completion]
            written = self._complete(conn, done, now) if done else {}
            for item in items:
                if type(item) is not Completion and item.lease not in written:
                    if (finished := self._finish_one(conn, item, now)) is not None:
                        written[item.lease] = finished
            return written

        def recorded(conn: sqlite3.Connection, now: float) -> tuple[dict[Lease, Finished], set[str]]:
            written = body(conn, now)
            self._roll(conn, written.values(), now)
            woken, changes = self._settle(conn, _ended(written.values()), now)
            _tell(written.values(), changes)
            return written, woken | self._spawn(conn, written.values(), now)

        written, woken = self._write(recorded)
        if woken:
            self._wake(woken)
        if self._finish_listeners:  # someone waits on a result: most batches build nothing here
            self._finished({f.lease.job_id for f in written.values() if f.status in TERMINAL})
        return [written[lease] for lease in dict.fromkeys(item.lease for item in items) if lease in written]

    def _roll(self, conn: sqlite3.Connection, written: Iterable[Finished], now: float) -> None:
        """The endings written, added to their minute's rollups in the same transaction."""
        minute = int(now) // 60 * 60
        for (queue, task, kind, bucket), n in rollup_tally(written).items():
            conn.execute(self._queries["rollup_add"], {"at": minute, "queue": queue, "task": task,
                                                       "kind": kind, "bucket": bucket, "n": n})

    def _complete(self, conn: sqlite3.Connection, items: list[Completion], now: float) -> dict[Lease, Finished]:
        """Successes, the most common ending, in three statements for the batch."""
        # Keyed by the lease as sent: a job is moved once (the first of its lease
        # wins), and the rows removed from the hot table carry back the lease that
        # applied in the same text, so no id is parsed back for every job.
        sent: dict[tuple[str, str], tuple[dict[str, str], Completion]] = {}
        for item in reversed(items):
            lease = _lease(item.lease)
            sent[lease["id"], lease["token"]] = lease, item
        params = {"now": now, "items": json.dumps([{
            **lease, "result": None if item.result is None else json.dumps(item.result),
        } for lease, item in sent.values()])}
        moved = [row["id"] for row in conn.execute(self._queries["jobs_complete_copy"], params)]
        written, events = {}, []
        for row in conn.execute(self._queries["jobs_remove"], {"ids": json.dumps(moved)}):
            _, item = sent[row["id"], row["lease_token"]]
            written[item.lease] = Finished(item, row["task"], row["queue"], Status.SUCCEEDED, row["attempts"],
                                           row["stage"])
            events.append([row["id"], row["attempts"], dict(item.meta)])
        if events:
            conn.execute(self._queries["jobs_complete_events"], {"now": now, "moved": json.dumps(events)})
        return written

    def _finish_one(self, conn: sqlite3.Connection, item: Finish, now: float) -> Finished | None:
        # A holder's lease must not have expired; the reclaim ends exactly those.
        fence = 0.0 if by_reclaim(item) else now
        match item:
            case FailNow():
                return self._fail(conn, self._take(conn, item.lease, fence), item, now)
            case Cancellation():
                taken = self._take(conn, item.lease, fence)
                if taken is None:
                    return None
                conn.execute(self._queries["cancel_request_take"], {"id": str(item.lease.job_id)})
                self._finish(conn, taken, "cancelled", now, {"by": item.by, **item.meta})
                return Finished(item, taken["task"], taken["queue"], Status.CANCELLED, taken["attempts"],
                                taken["stage"], cancelled_by=item.by)
            case RetryLater():
                return self._retry(conn, item, now)
            case Requeue():
                row = conn.execute(self._queries["job_requeue"], {
                    **_lease(item.lease), "now": now, "fence": fence, "refund": int(item.refund),
                    "delay_s": item.delay.total_seconds(),
                }).fetchone()
                if row is None:
                    return None
                self._event(conn, str(item.lease.job_id), "running", "queued", row["attempts"], now, dict(item.meta))
                return Finished(item, row["task"], row["queue"], Status.QUEUED, row["attempts"] + item.refund,
                                row["stage"])
        return None

    def _retry(self, conn: sqlite3.Connection, item: RetryLater, now: float) -> Finished | None:
        row = conn.execute(self._queries["job_retry"], {
            **_lease(item.lease), "now": now, "fence": now, "delay_s": item.delay.total_seconds(),
            "error_code": item.error_code, "error_message": item.error_message,
            "stage": item.stage,
            "stage_attempts": None if item.stage_attempts is None else json.dumps(dict(item.stage_attempts)),
        }).fetchone()
        if row is None:
            return None
        job_id, stage = str(item.lease.job_id), row["stage"]
        asked = conn.execute(self._queries["cancel_request_take"], {"id": job_id}).fetchone()
        status, by = ends_as(item, cancel_asked_by=asked["by"] if asked is not None else None)
        if status is Status.QUEUED:
            self._event(conn, job_id, "running", "queued", row["attempts"], now, retry_meta(
                error_code=item.error_code, delay=item.delay, stage=stage, extra=item.meta))
            return Finished(item, row["task"], row["queue"], Status.QUEUED, row["attempts"], stage)
        # A cancel was asked while it ran: the cancel wins, with the attempt's error kept.
        assert by is not None
        taken = conn.execute(self._queries["job_take_waiting"], {"id": job_id}).fetchone()
        self._finish(conn, taken, "cancelled", now, cancel_meta(
            by=by, error_code=item.error_code, stage=stage, extra=item.meta), before="running")
        return Finished(item, row["task"], row["queue"], Status.CANCELLED, row["attempts"], stage, cancelled_by=by)

    def _finish(
        self, conn: sqlite3.Connection, taken: sqlite3.Row | None, status: str, now: float,
        meta: dict, before: str | None = None, **changes: Any,
    ) -> bool:
        """Move a row taken out of the hot table into history as ``status``."""
        if taken is None:
            return False
        row = dict(taken)
        row.update(_NO_LEASE, status=status, updated_at=now, finished_at=now, failed_at=None)
        row.update(changes)
        conn.execute(self._queries["job_done_insert"], row)
        self._event(conn, row["id"], before or taken["status"], status, row["attempts"], now, meta)
        return True

    def _take(self, conn: sqlite3.Connection, lease: Lease, fence: float) -> sqlite3.Row | None:
        """The running row ``lease`` holds, out of the hot table, if its lease ends after ``fence``."""
        return conn.execute(self._queries["job_take_running"], {**_lease(lease), "fence": fence}).fetchone()

    def _fail(self, conn: sqlite3.Connection, taken: sqlite3.Row | None, item: FailNow, now: float) -> Finished | None:
        if taken is None:
            return None
        error_class = item.error_class or item.error_code
        stage = item.stage or taken["stage"]
        stage_attempts = (json.dumps(dict(item.stage_attempts)) if item.stage_attempts is not None
                          else taken["stage_attempts"])
        first_failed_at = taken["first_failed_at"] or now
        previous = conn.execute(self._queries["dead_letter_previous"], {"job_id": taken["id"]}).fetchone()
        escalated = escalates(previous_error_class=previous["error_class"] if previous else None,
                              previous_replayed=bool(previous and previous["replayed_at"] is not None),
                              error_class=error_class, retryable=item.retryable)
        letter = conn.execute(self._queries["dead_letter_insert"], {
            "job_id": taken["id"], "task": taken["task"], "queue": taken["queue"],
            "owner": taken["owner"], "error_class": error_class, "error_code": item.error_code,
            "error_message": item.error_message, "retryable": item.retryable, "stage": stage,
            "stage_attempts": stage_attempts, "attempts": taken["attempts"],
            "last_stack": item.stack, "context": json.dumps(dict(item.context)),
            "first_failure_at": first_failed_at, "last_failure_at": now,
            "escalated": escalated, "previous_id": previous["id"] if previous else None,
        }).fetchone()
        meta = fail_meta(error_code=item.error_code, error_class=error_class, stage=stage,
                         dead_letter_id=letter["id"], escalated=escalated, extra=item.meta)
        self._finish(
            conn, taken, "failed", now, meta,
            error_code=item.error_code, error_message=item.error_message,
            last_error_code=item.error_code, last_error_message=item.error_message, failed_at=now,
            stage=stage, stage_attempts=stage_attempts, first_failed_at=first_failed_at,
        )
        return Finished(item, taken["task"], taken["queue"], Status.FAILED, taken["attempts"], stage,
                        dead_letter_id=letter["id"], escalated=bool(escalated))

    def _cancel_waiting(self, conn: sqlite3.Connection, job_id: str, by: str, now: float) -> bool:
        taken = conn.execute(self._queries["job_take_waiting"], {"id": job_id}).fetchone()
        return self._finish(conn, taken, "cancelled", now, {"by": by})

    def progress_save(self, *, lease: Lease, progress: Progress) -> bool:
        return self._write(lambda conn, now: conn.execute(self._queries["progress_save"], {
            **_lease(lease), "now": now, "value": json.dumps(progress.stored())}).fetchone() is not None)

    def stages_save(self, *, items: Sequence[StageDone]) -> set[Lease]:
        if not items:
            return set()
        return self._write(lambda conn, now: {item.lease for item in items if conn.execute(
            self._queries["stage_save"], {
                **_lease(item.lease), "now": now, "stage": item.stage, "output": json.dumps(item.output),
                "stage_attempts": json.dumps(dict(item.stage_attempts)), "next_stage": item.next_stage,
            }).fetchone() is not None})

    def jobs_reclaim(self, *, limit: int = 500, worker_id: str | None = None,
                     bystanders: bool = False) -> list[Finished]:
        def body(conn: sqlite3.Connection, now: float) -> tuple[list[Finished], set[str]]:
            written = []
            query, params = (("jobs_held", {"worker_id": worker_id, "limit": limit}) if worker_id is not None
                             else ("jobs_expired", {"now": now, "limit": limit}))
            for row in conn.execute(self._queries[query], params).fetchall():
                ending = taken_back(Lease(UUID(row["id"]), UUID(row["lease_token"])), row["lease_owner"],
                                    last=row["attempts"] >= row["max_attempts"], crashed=worker_id is not None, bystander=bystanders)
                if (finished := self._finish_one(conn, ending, now)) is not None:
                    written.append(finished)
            self._roll(conn, written, now)
            woken, changes = self._settle(conn, _ended(written), now)
            _tell(written, changes)
            return written, woken

        written, woken = self._write(body)
        self._wake(woken)
        self._finished({f.lease.job_id for f in written if f.status in TERMINAL})
        return written

    def jobs_cancel(self, *, job_ids: Sequence[UUID], by: str) -> list[Job | None]:
        def body(conn: sqlite3.Connection, now: float) -> tuple[set[UUID], set[str]]:
            ended = set()
            for job_id in job_ids:
                if self._cancel_waiting(conn, str(job_id), by, now):
                    ended.add(job_id)
                else:
                    conn.execute(self._queries["cancel_request_add"], {"id": str(job_id), "by": by, "now": now})
            return ended, self._settle(conn, ((str(job_id), Status.CANCELLED.value) for job_id in ended), now)[0]

        ended, woken = self._write(body) if job_ids else (set(), set())
        self._wake(woken)
        if ended:
            self._finished(ended)
        found = [self.job_get(job_id=job_id) for job_id in job_ids]
        return [job if job is not None and (job.id in ended or job.status is Status.RUNNING) else None
                for job in found]

    def jobs_revive(self, *, revivals: Sequence[Revival]) -> list[Job | None]:
        distinct_jobs(revivals)
        revived = self._write(lambda conn, now: [self._revive(conn, now, r) for r in revivals]) if revivals else []
        if queues := {job.queue for job in revived if job is not None}:
            self._wake(queues)
        return revived

    def _revive(self, conn: sqlite3.Connection, now: float, revival: Revival) -> Job | None:
        job_id, plan = str(revival.job_id), revival.plan
        if revival.dead_letter_id is not None and conn.execute(self._queries["dead_letter_open_check"], {
            "id": revival.dead_letter_id, "job_id": job_id,
        }).fetchone() is None:
            return None
        taken = conn.execute(self._queries["job_take_failed"], {
            "id": job_id, "failed_at": _epoch(plan.failed_at)}).fetchone()
        if taken is None:
            return None
        old = dict(taken)
        row = conn.execute(self._queries["job_revived_insert"], {
            **old, "now": now, "stage": plan.stage,
            "checkpoint": old["checkpoint"] if plan.keep_checkpoint else "{}",
            "stage_attempts": json.dumps(plan.stage_attempts), "manual_retry_count": plan.manual_retries,
        }).fetchone()
        conn.execute(self._queries["cancel_request_take"], {"id": job_id})
        letters = conn.execute(self._queries["dead_letters_mark_replayed"], {
            "job_id": job_id, "now": now, "by": plan.by, "replay_from": plan.replay_from,
        }).fetchall()
        self._event(conn, job_id, "failed", "queued", 0, now, plan.meta([r["id"] for r in letters]))
        self._unblock(conn, job_id, now)
        return _job(row)
