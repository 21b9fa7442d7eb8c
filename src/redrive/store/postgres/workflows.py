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
from redrive.store.reads import Page, decode_cursor, encode_cursor, page_size, paged


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
        return self._states(rows)[0] if rows else None

    def workflows_page(self, *, owner: str | None = None, after: str | None = None,
                       limit: int = 50) -> Page[WorkflowState]:
        size, key = page_size(limit), decode_cursor(after, 2)
        rows = self._run("workflows_recent", {"owner": owner, "limit": size + 1,
                                              "after_at": None if key is None else key[0],
                                              "after_id": None if key is None else key[1]})
        page = paged(rows, size, lambda row: encode_cursor(row["created_at"].isoformat(), str(row["id"])))
        return Page(self._states(page.items), page.next_cursor)

    def _states(self, rows: list[dict[str, Any]]) -> list[WorkflowState]:
        """Workflows from their rows, with their steps' counts in one query for all of them."""
        counts: dict[UUID, dict[str, dict[Status, int]]] = {}
        for c in self._run("workflows_counts", {"ids": [row["id"] for row in rows]}) if rows else []:
            counts.setdefault(c["workflow_id"], {}).setdefault(c["name"], {})[Status(c["status"])] = c["n"]
        states = []
        for row in rows:
            # a list of [name, parents]: JSON objects in jsonb do not keep the order steps were declared in
            graph = {name: [(p, policy) for p, policy in after] for name, after in row["graph"]}
            steps = {name: counts.get(row["id"], {}).get(name, {}) for name in graph}
            states.append(WorkflowState(row["id"], row["name"], row["owner"], row["key"], row["created_at"],
                                        row["cancelled_at"], row["cancelled_by"], graph, steps, row["spawned_by"]))
        return states

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
