"""What an operator or a service asks (``store.operations.Operations``):
deleting jobs, pausing queues and schedules, dead letters' notes and
resolutions, alerts, the audit trail and the dashboard's sessions."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from redrive.core.job import DeadLetter
from redrive.errors import DeadLetterNotFound
from redrive.store.reads import AuditEntry
from redrive.store.sqlite.codecs import _audit, _dead_letter, _time
from redrive.store.sqlite.work import Work


class Operations(Work):
    def jobs_delete(self, *, job_ids: Sequence[UUID]) -> list[UUID]:
        def body(conn: sqlite3.Connection, now: float) -> list[UUID]:
            picked = [row["id"] for row in conn.execute(self._queries["jobs_deletable"],
                                                        {"ids": json.dumps([str(i) for i in job_ids])})]
            self._forget(conn, picked)
            return [UUID(i) for i in picked]

        return self._write(body) if job_ids else []

    def queue_pause(self, *, queue: str, by: str) -> bool:
        return self._write(lambda conn, now: conn.execute(self._queries["queue_pause"], {
            "queue": queue, "by": by, "now": now}).fetchone() is not None)

    def queue_resume(self, *, queue: str) -> bool:
        resumed = self._write(lambda conn, now: conn.execute(self._queries["queue_resume"], {
            "queue": queue}).fetchone() is not None)
        if resumed:
            self._wake({queue})
        return resumed

    def dead_letter_note(self, *, id: int, text: str, by: str | None) -> DeadLetter:
        row = self._write(lambda conn, now: conn.execute(self._queries["dead_letter_note"], {
            "id": id, "text": text, "by": by, "at": _time(now).isoformat(),
        }).fetchone())
        if row is None:
            raise DeadLetterNotFound(f"no dead letter has id {id}")
        return _dead_letter(row)

    def dead_letters_resolve(self, *, ids: Sequence[int], by: str | None, note: str | None = None) -> list[DeadLetter]:
        rows = self._write(lambda conn, now: conn.execute(self._queries["dead_letters_resolve"], {
            "ids": json.dumps(list(ids)), "by": by, "note": note, "now": now, "at": _time(now).isoformat(),
        }).fetchall())
        return sorted((_dead_letter(row) for row in rows), key=lambda d: d.id)

    def schedule_pause(self, *, name: str, by: str, now: datetime) -> bool:
        return bool(self._write(lambda conn, clock: conn.execute(self._queries["schedule_pause"], {
            "name": name, "by": by, "at": now.timestamp(), "now": clock}).fetchall()))

    def schedule_resume(self, *, name: str) -> bool:
        return bool(self._write(lambda conn, clock: conn.execute(self._queries["schedule_resume"], {
            "name": name, "now": clock}).fetchall()))

    def alert_fire(self, *, rule: str, incident: str, detail: str) -> bool:
        return self._write(lambda conn, now: conn.execute(self._queries["alert_fire"], {
            "rule": rule, "incident": incident, "detail": detail, "now": now}).fetchone() is not None)

    def alert_resolve(self, *, rule: str, incident: str) -> bool:
        return self._write(lambda conn, now: conn.execute(self._queries["alert_resolve"], {
            "rule": rule, "incident": incident}).fetchone() is not None)

    def audit_record(self, *, by: str, action: str, job_id: UUID | None = None,
                     detail: dict[str, Any] | None = None) -> AuditEntry:
        row = self._write(lambda conn, now: conn.execute(self._queries["audit_record"], {
            "now": now, "by": by, "action": action, "job_id": None if job_id is None else str(job_id),
            "detail": json.dumps(detail or {})}).fetchone())
        return _audit(row)

    def session_open(self, *, id: str, principal: str, ttl: timedelta) -> None:
        def body(conn: sqlite3.Connection, now: float) -> None:
            conn.execute(self._queries["session_forget_expired"], {"now": now})
            conn.execute(self._queries["session_open"], {"id": id, "principal": principal, "now": now,
                                                          "ttl": ttl.total_seconds()})

        self._write(body)

    def session_read(self, *, id: str) -> str | None:
        rows = self._reading(lambda conn, now: conn.execute(self._queries["session_read"],
                                                            {"id": id, "now": now}).fetchall())
        return rows[0]["principal"] if rows else None

    def session_close(self, *, id: str) -> None:
        self._write(lambda conn, now: conn.execute(self._queries["session_close"], {"id": id}))
