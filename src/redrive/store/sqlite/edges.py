"""A workflow's edges resolved in the transaction that ends a parent
(core/workflow.py): the endings call ``_settle`` with the jobs that reached a
final ending, revivals call ``_unblock``. A plain job costs one probe per
batch (it has no edges)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable

from redrive.core.states import Status
from redrive.core.workflow import EdgeState, step_status
from redrive.store.sqlite.enqueue import Enqueue


class Edges(Enqueue):
    def _settle(self, conn: sqlite3.Connection, ended: Iterable[tuple[str, str]], now: float) -> set[str]:
        """Resolve the edges out of each (job id, final status) of ``ended``;
        answers the queues where a step was released."""
        ending = dict(ended)
        if not ending:
            return set()
        woken: set[str] = set()
        for row in conn.execute(self._queries["edges_parents"], {"ids": json.dumps(list(ending))}).fetchall():
            parent = row["parent_id"]
            resolved = conn.execute(self._queries["edges_resolve"], {"id": parent, "status": ending[parent]}).fetchall()
            for edge in resolved:
                blocks = edge["state"] == EdgeState.BLOCKING
                woken |= self._step_counted(conn, edge["child_id"], -1, int(blocks), Status.PENDING, now)
        return woken

    def _unblock(self, conn: sqlite3.Connection, revived: str, now: float) -> None:
        """A failed parent revived: the edges it blocked wait on it again."""
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
        return {moved["queue"]} if to is Status.QUEUED else set()
