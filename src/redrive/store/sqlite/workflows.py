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
from redrive.store.reads import Page, decode_cursor, encode_cursor, page_size, paged
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
        return self._states(rows)[0] if rows else None

    def workflows_page(self, *, owner: str | None = None, after: str | None = None,
                       limit: int = 50) -> Page[WorkflowState]:
        size, key = page_size(limit), decode_cursor(after, 2)
        rows = self._read("workflows_recent", {"owner": owner, "limit": size + 1,
                                               "after_at": None if key is None else key[0],
                                               "after_id": None if key is None else key[1]})
        page = paged(rows, size, lambda row: encode_cursor(row["created_at"], row["id"]))
        return Page(self._states(page.items), page.next_cursor)

    def _states(self, rows: list[Any]) -> list[WorkflowState]:
        """Workflows from their rows, with their steps' counts in one query for all of them."""
        counts: dict[str, dict[str, dict[Status, int]]] = {}
        ids = json.dumps([row["id"] for row in rows])
        for c in self._read("workflows_counts", {"ids": ids}) if rows else []:
            counts.setdefault(c["workflow_id"], {}).setdefault(c["name"], {})[Status(c["status"])] = c["n"]
        states = []
        for row in rows:
            graph = {name: [(p, policy) for p, policy in after] for name, after in json.loads(row["graph"])}
            steps = {name: counts.get(row["id"], {}).get(name, {}) for name in graph}
            states.append(WorkflowState(
                UUID(row["id"]), row["name"], row["owner"], row["key"], _time(row["created_at"]),
                _time(row["cancelled_at"]), row["cancelled_by"], graph, steps,
                None if row["spawned_by"] is None else UUID(row["spawned_by"])))
        return states

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
