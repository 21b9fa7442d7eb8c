"""A workflow's steps and edges, written in the transaction that creates it
(``workflow_insert``, or the ending of the job that spawned it), and resolved
in the transaction that ends a parent (core/workflow.py): the endings call
``_settle`` with the jobs that reached a final ending, revivals call
``_unblock``. A workflow counts its steps not ended, so the ending of its
last one says how it ended, once. A plain job costs one probe per batch (it
is no step)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from redrive.core.states import Status
from redrive.core.transitions import Completion, Finished
from redrive.core.workflow import EdgeState, NewWorkflow, WorkflowChange, WorkflowCreated, ended_as, step_status
from redrive.store.sqlite.enqueue import Enqueue


class Edges(Enqueue):
    def _workflow_create(self, cur: Any, workflow: NewWorkflow, now: float) -> tuple[WorkflowCreated, set[str]]:
        """The workflow, its steps (jobs, with ``enqueue``'s insert) and its
        edges; answers it and the queues with a step due now. A key taken
        creates nothing and answers the workflow that holds it."""
        made = cur.execute(self._queries["workflow_insert"], {
            "id": str(workflow.id), "name": workflow.name, "owner": workflow.owner, "key": workflow.key,
            "graph": json.dumps(list(workflow.graph.items())), "now": now, "open": len(workflow.steps),
            "spawned_by": None if workflow.spawned_by is None else str(workflow.spawned_by)}).fetchone()
        if made is None:
            held = UUID(cur.execute(self._queries["workflow_by_key"], {
                "owner": workflow.owner, "key": workflow.key}).fetchone()["id"])
            return WorkflowCreated(held, duplicate=True, steps=self._steps_of(cur, held)), set()
        _, due = self._insert(cur, [step.job for step in workflow.steps], now)
        parents = workflow.parents()
        cur.executemany(self._queries["step_insert"], [{
            "job_id": str(step.job.id), "workflow_id": str(workflow.id), "name": step.name,
            "position": step.position, "waiting": parents.get(step.job.id, 0)} for step in workflow.steps])
        cur.executemany(self._queries["edge_insert"], [{
            "parent_id": str(e.parent), "child_id": str(e.child), "policy": e.policy.value}
            for e in workflow.edges])
        return WorkflowCreated(workflow.id, duplicate=False, steps=self._steps_of(cur, workflow.id)), due

    def _spawn(self, conn: sqlite3.Connection, written: Iterable[Finished], now: float) -> set[str]:
        """The workflows each success written spawned (``redrive.spawn``), in its ending's transaction."""
        due: set[str] = set()
        for done in written:
            if type(done.item) is Completion:
                for spawned in done.item.spawned:
                    due |= self._workflow_create(conn, spawned, now)[1]
        return due

    def _steps_of(self, cur: Any, workflow_id: UUID) -> dict[str, tuple[UUID, ...]]:
        named: dict[str, list[UUID]] = {}
        for row in cur.execute(self._queries["workflow_steps"], {"id": str(workflow_id), "statuses": None}):
            named.setdefault(row["name"], []).append(UUID(row["job_id"]))
        return {name: tuple(ids) for name, ids in named.items()}

    def _settle(self, conn: sqlite3.Connection, ended: Iterable[tuple[str, str]], now: float
                ) -> tuple[set[str], dict[str, list[WorkflowChange]]]:
        """The steps among ``ended`` (job id, final status): their workflows'
        open counts, then the edges out of them. Answers the queues where a
        step was released, and each workflow change by the ended job it is
        told on (core/workflow.py's WorkflowChange)."""
        ending = dict(ended)
        woken: set[str] = set()
        changes: dict[str, list[WorkflowChange]] = {}
        if not ending:
            return woken, changes
        steps = conn.execute(self._queries["steps_of"], {"ids": json.dumps(list(ending))}).fetchall()
        by_workflow: dict[str, list[str]] = {}
        for step in steps:
            by_workflow.setdefault(step["workflow_id"], []).append(step["job_id"])
        for workflow_id, jobs in sorted(by_workflow.items()):
            row = conn.execute(self._queries["workflow_steps_ended"], {"id": workflow_id, "n": len(jobs)}).fetchone()
            if row["open_steps"] == 0:
                done = [r["status"] for r in conn.execute(self._queries["workflow_endings"], {"id": workflow_id})]
                became = ended_as([*done, *(ending[j] for j in jobs)], cancelled=row["cancelled_at"] is not None)
                changes.setdefault(jobs[0], []).append(WorkflowChange(UUID(workflow_id), row["name"], became))
        for step in steps:
            parent = step["job_id"]
            resolved = conn.execute(self._queries["edges_resolve"], {"id": parent, "status": ending[parent]}).fetchall()
            blocked = 0
            for edge in resolved:
                blocks = edge["state"] == EdgeState.BLOCKING
                released = self._step_counted(conn, edge["child_id"], -1, int(blocks), Status.PENDING, now)
                woken |= released - {""}
                blocked += "" in released
            if blocked:
                changes.setdefault(parent, []).append(
                    WorkflowChange(UUID(step["workflow_id"]), step["workflow_name"], "blocked", blocked))
        return woken, changes

    def _unblock(self, conn: sqlite3.Connection, revived: str, now: float) -> None:
        """A failed step revived: its workflow has one more step open, and the
        edges it blocked wait on it again."""
        conn.execute(self._queries["workflow_step_reopened"], {"id": revived})
        for edge in conn.execute(self._queries["edges_reopen"], {"id": revived}).fetchall():
            self._step_counted(conn, edge["child_id"], 1, -1, Status.BLOCKED, now)

    def _step_counted(self, conn: sqlite3.Connection, child: str, waiting: int, blocking: int,
                      was: Status, now: float) -> set[str]:
        counts = conn.execute(self._queries["step_count"], {
            "id": child, "waiting": waiting, "blocking": blocking}).fetchone()
        to = step_status(counts["waiting"], counts["blocking"])
        if to is was:
            return set()
        moved = conn.execute(self._queries["step_move"], {
            "id": child, "to": to.value, "from": was.value, "now": now}).fetchone()
        if moved is None:  # the child was cancelled, or is blocked by another parent
            return set()
        self._event(conn, child, was.value, to.value, moved["attempts"], now)
        # "": a step blocked (no queue to wake)
        return {moved["queue"]} if to is Status.QUEUED else ({""} if to is Status.BLOCKED else set())
