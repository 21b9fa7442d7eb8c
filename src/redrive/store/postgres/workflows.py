"""Workflows on PostgreSQL: a workflow, its steps and its edges in one
transaction (the store's own or the caller's), its counts, its steps, its
cancel, and what a running step reads of its parents. Edges are resolved in
the endings' own statements (``sql/endings.sql``, migration 0027)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg

from redrive.core.states import ACTIVE, Status
from redrive.core.workflow import NewWorkflow, Upstream, WorkflowCreated, WorkflowState
from redrive.errors import ConfigError
from redrive.store.postgres.connection import _savepoint
from redrive.store.postgres.listen import Listening


class Workflows(Listening):
    def workflow_insert(self, *, workflow: NewWorkflow, conn: Any = None) -> WorkflowCreated:
        if conn is not None:
            if not isinstance(conn, psycopg.Connection):
                raise ConfigError("PostgresStore joins only a psycopg (3) Connection's transaction")
            with self._errors(), _savepoint(conn):
                return self._workflow_create(workflow, conn)
        with self._errors(), self._connection() as pooled, pooled.transaction():
            return self._workflow_create(workflow, pooled)

    def workflow_steps(self, *, id: UUID) -> dict[str, tuple[UUID, ...]]:
        return self._steps_of(id)

    def workflow_get(self, *, id: UUID) -> WorkflowState | None:
        rows = self._run("workflow_read", {"id": id})
        if not rows:
            return None
        row = rows[0]
        # a list of [name, parents]: JSON objects in jsonb do not keep the order steps were declared in
        graph = {name: [(p, policy) for p, policy in after] for name, after in row["graph"]}
        counts: dict[str, dict[Status, int]] = {name: {} for name in graph}
        for c in self._run("workflow_counts", {"id": id}):
            counts.setdefault(c["name"], {})[Status(c["status"])] = c["n"]
        return WorkflowState(row["id"], row["name"], row["owner"], row["key"], row["created_at"],
                             row["cancelled_at"], row["cancelled_by"], graph, counts, row["spawned_by"])

    def workflows_list(self, *, owner: str | None = None, limit: int = 50) -> list[WorkflowState]:
        rows = self._run("workflows_recent", {"owner": owner, "limit": limit})
        return [found for row in rows if (found := self.workflow_get(id=row["id"])) is not None]

    def workflow_jobs(self, *, id: UUID, statuses: Sequence[Status] = ()) -> list[UUID]:
        wanted = [s.value for s in statuses] if statuses else None
        return [row["job_id"] for row in self._run("workflow_steps", {"id": id, "statuses": wanted})]

    def workflow_cancel(self, *, id: UUID, by: str) -> bool:
        if not self._run("workflow_mark_cancelled", {"id": id, "by": by}):
            return False
        self.jobs_cancel(job_ids=self.workflow_jobs(id=id, statuses=tuple(ACTIVE)), by=by)
        return True

    def step_parents(self, *, job_id: UUID) -> list[Upstream]:
        return [Upstream(row["parent_id"], row["name"], row["position"], Status(row["status"]), row["result"],
                         row["error_code"]) for row in self._run("step_parents", {"id": job_id})]
