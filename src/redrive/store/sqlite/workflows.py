"""Workflows on SQLite: a workflow, its steps (jobs, with ``enqueue``'s
insert) and its edges in one transaction, its counts, its steps, its cancel,
and what a running step reads of its parents. Edges are resolved by the
endings (``edges.py``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from redrive.core.states import ACTIVE, Status
from redrive.core.workflow import NewWorkflow, Upstream, WorkflowCreated, WorkflowState
from redrive.store.sqlite.codecs import _time
from redrive.store.sqlite.reads import Reading


class Workflows(Reading):
    def workflow_insert(self, *, workflow: NewWorkflow, conn: Any = None) -> WorkflowCreated:
        if conn is not None:
            return self._in_callers(conn, lambda cur, now: self._workflow_create(cur, workflow, now))[0]
        created, due = self._write(lambda cur, now: self._workflow_create(cur, workflow, now))
        self._wake(due)
        return created

    def workflow_steps(self, *, id: UUID) -> dict[str, tuple[UUID, ...]]:
        return self._reading(lambda conn, _: self._steps_of(conn, id))

    def workflow_get(self, *, id: UUID) -> WorkflowState | None:
        rows = self._read("workflow_read", {"id": str(id)})
        if not rows:
            return None
        row = rows[0]
        graph = {name: [(p, policy) for p, policy in after] for name, after in json.loads(row["graph"])}
        counts: dict[str, dict[Status, int]] = {name: {} for name in graph}
        for c in self._read("workflow_counts", {"id": str(id)}):
            counts.setdefault(c["name"], {})[Status(c["status"])] = c["n"]
        return WorkflowState(UUID(row["id"]), row["name"], row["owner"], row["key"], _time(row["created_at"]),
                             _time(row["cancelled_at"]), row["cancelled_by"], graph, counts,
                             None if row["spawned_by"] is None else UUID(row["spawned_by"]))

    def workflows_list(self, *, owner: str | None = None, limit: int = 50) -> list[WorkflowState]:
        rows = self._read("workflows_recent", {"owner": owner, "limit": limit})
        return [found for row in rows if (found := self.workflow_get(id=UUID(row["id"]))) is not None]

    def workflow_jobs(self, *, id: UUID, statuses: Sequence[Status] = ()) -> list[UUID]:
        wanted = json.dumps([s.value for s in statuses]) if statuses else None
        return [UUID(row["job_id"]) for row in self._read("workflow_steps", {"id": str(id), "statuses": wanted})]

    def workflow_cancel(self, *, id: UUID, by: str) -> bool:
        def body(conn: sqlite3.Connection, now: float) -> bool:
            return conn.execute(self._queries["workflow_mark_cancelled"], {
                "id": str(id), "by": by, "now": now}).fetchone() is not None

        if not self._write(body):
            return False
        self.jobs_cancel(job_ids=self.workflow_jobs(id=id, statuses=tuple(ACTIVE)), by=by)
        return True

    def step_parents(self, *, job_id: UUID) -> list[Upstream]:
        return [Upstream(UUID(row["parent_id"]), row["name"], row["position"], Status(row["status"]),
                         None if row["result"] is None else json.loads(row["result"]), row["error_code"])
                for row in self._read("step_parents", {"id": str(job_id)})]
