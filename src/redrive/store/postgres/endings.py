"""Every state change of a job after its enqueue: endings (finish, and the
reclaim's, both through the one batched statement), stages saved, cancels
and revivals (manual retries, dead letters replayed). Each is one fenced
statement over a batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from redrive.core.dead_letters import Revival, distinct_jobs
from redrive.core.job import Job, Lease, StageDone
from redrive.core.progress import Progress
from redrive.core.rollups import rollup_tally
from redrive.core.states import TERMINAL
from redrive.core.transitions import Completion, Finish, Finished, taken_back
from redrive.core.workflow import WorkflowChange
from redrive.store.postgres.codecs import _applied, _finish_json, _job, _lease_json, _successes, _tally
from redrive.store.postgres.connection import _STATUS
from redrive.store.postgres.enqueue import Enqueue


class Endings(Enqueue):
    def jobs_finish(self, items: Sequence[Finish]) -> list[Finished]:
        if not items:
            return []
        firsts: dict[Lease, Finish] = {}
        for item in items:
            firsts.setdefault(item.lease, item)  # a job is ended once: the first of its lease wins
        once = list(firsts.values())
        spawning = [item for item in once if type(item) is Completion and item.spawned]
        if spawning:  # rare: each in a transaction of its own with what it spawned
            plain = [item for item in once if not (type(item) is Completion and item.spawned)]
            written = {f.item.lease: f for f in self._finish_batch(plain)}
            for item in spawning:
                written.update((f.item.lease, f) for f in self._finish_spawning(item))
            return [written[item.lease] for item in once if item.lease in written]
        return self._finish_batch(once)

    def _finish_batch(self, once: list[Finish], conn: Any = None) -> list[Finished]:
        """A batch, each lease once, in a transaction (``conn``'s, or one of
        its own in a pipeline): ``jobs_finish`` writes the endings and answers
        what it wrote, then ``jobs_ended`` adds their tally to the rollups
        (counted here, as the other stores count it: counted in SQL it was a
        fifth of the ending's work, bench/NOTES.md), tells whoever awaits them
        and settles the workflow steps after them. The second goes out with
        the COMMIT, so the rows workers share are never locked across a round
        trip; the first holds only the batch's own jobs meanwhile."""
        if not once:
            return []
        successes = [(n, item) for n, item in enumerate(once) if type(item) is Completion]
        others = [_finish_json(n, item) for n, item in enumerate(once) if type(item) is not Completion]
        params = {**_successes(successes), "others": Jsonb(others)}
        places = self._places.take(item.lease.token for _, item in successes)
        self._places.forget(item.lease.token for item in once)  # each lease ends once, whatever its end
        if places is not None:
            params["places"] = places
        if conn is not None:
            written, after = self._finish_on(conn, once, params, successes)
            followed = after.fetchall() if after is not None else []
        else:
            with self._errors(), self._connection() as pooled:
                with pooled.pipeline(), pooled.transaction():
                    written, after = self._finish_on(pooled, once, params, successes)
                followed = after.fetchall() if after is not None else []  # committed: its answer is in
        if followed and followed[0][1]:  # the batch ended steps of a workflow that changed
            _tell_changes(written, followed[0][1])
        return written

    def _finish_on(self, conn: Any, once: list[Finish], params: dict[str, Any],
                   successes: list[tuple[int, Completion]]) -> tuple[list[Finished], Any]:
        """``_finish_batch``'s two statements on ``conn``: what the first
        wrote, and the cursor of the second (none when there was nothing to
        follow), whose answer is read once the transaction commits. With the
        successes' places, the first finds their rows there; those not found
        (a row that moved since, or a lease lost) are looked for by id too."""
        cur = conn.cursor(row_factory=tuple_row)
        placed = "places" in params
        rows = cur.execute(self._queries["jobs_finish_at" if placed else "jobs_finish"],
                           self._with_clock(params)).fetchall()
        if placed and len(rows) < len(once):
            found = {row[0] for row in rows}
            if missed := [(n, item) for n, item in successes if n not in found]:
                rows += cur.execute(self._queries["jobs_finish"], self._with_clock(
                    {**_successes(missed), "others": Jsonb([])})).fetchall()
        rows.sort()
        written = [Finished(once[n], task, queue, _STATUS[status], attempt, stage, dead_letter_id, escalated, by)
                   for n, task, queue, status, attempt, stage, dead_letter_id, escalated, by in rows]
        added = rollup_tally(written)
        ended = [f for f in written if f.status in TERMINAL]  # a retry is neither told nor settled
        if not (added or ended):
            return written, None
        return written, cur.execute(self._queries["jobs_ended"], self._with_clock({
            **_tally(added), "ids": [f.lease.job_id for f in ended], "statuses": [f.status.value for f in ended]}))

    def _finish_spawning(self, item: Completion) -> list[Finished]:
        """A success and the workflows its run spawned, in one transaction:
        a success refused (its lease lost) creates none of them."""
        with self._errors(), self._connection() as conn, conn.transaction():
            written = self._finish_batch([item], conn)
            if written:
                for spawned in item.spawned:
                    self._workflow_write(spawned, conn)
            return written

    def progress_save(self, *, lease: Lease, progress: Progress) -> bool:
        return bool(self._run("progress_save", {"id": lease.job_id, "token": lease.token,
                                                "value": Jsonb(progress.stored())}))

    def stages_save(self, *, items: Sequence[StageDone]) -> set[Lease]:
        return self._fenced("stages_save", [
            {**_lease_json(i.lease), "stage": i.stage, "output": i.output,
             "stage_attempts": dict(i.stage_attempts), "next_stage": i.next_stage}
            for i in items
        ])

    def _fenced(self, name: str, items: list[dict]) -> set[Lease]:
        if not items:
            return set()
        return _applied(self._run(name, {"items": Jsonb(items)}))

    def jobs_reclaim(self, *, limit: int = 500, worker_id: str | None = None,
                     bystanders: bool = False) -> list[Finished]:
        rows = (self._run("jobs_held", {"worker_id": worker_id, "limit": limit}) if worker_id is not None
                else self._run("jobs_expired", {"limit": limit}))
        return self.jobs_finish([
            taken_back(Lease(row["id"], row["lease_token"]), row["lease_owner"],
                       last=row["attempts"] >= row["max_attempts"], crashed=worker_id is not None, bystander=bystanders)
            for row in rows
        ])

    def jobs_cancel(self, *, job_ids: Sequence[UUID], by: str) -> list[Job | None]:
        if not job_ids:
            return []
        found = {row["id"]: _job(row) for row in self._run("jobs_cancel", {"ids": list(job_ids), "by": by})}
        return [found.get(job_id) for job_id in job_ids]

    def jobs_revive(self, *, revivals: Sequence[Revival]) -> list[Job | None]:
        if not distinct_jobs(revivals):
            return []
        rows = self._run("jobs_revive", {"revivals": Jsonb([{
            "id": str(r.job_id), "failed_at": None if r.plan.failed_at is None else r.plan.failed_at.isoformat(),
            "dead_letter_id": r.dead_letter_id, "by": r.plan.by, "replay_from": r.plan.replay_from,
            "stage": r.plan.stage, "stage_attempts": r.plan.stage_attempts,
            "keep_checkpoint": r.plan.keep_checkpoint, "manual_retries": r.plan.manual_retries,
            "meta": r.plan.meta([]),
        } for r in revivals])})
        revived = {row["id"]: _job(row) for row in rows}
        return [revived.get(r.job_id) for r in revivals]


def _tell_changes(written: list[Finished], changes: list[dict[str, Any]]) -> None:
    """Each workflow change on the ending (of a job of that workflow) that made it."""
    by_job: dict[UUID, list[WorkflowChange]] = {}
    for change in changes:
        by_job.setdefault(UUID(change["job"]), []).append(
            WorkflowChange(UUID(change["id"]), change["name"], change["became"], change.get("blocked") or 0))
    for finished in written:
        if found := by_job.get(finished.lease.job_id):
            finished.workflows = tuple(found)
