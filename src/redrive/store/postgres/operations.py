"""What an operator or a service asks (``store.operations.Operations``):
deleting jobs, pausing queues and schedules, dead letters' notes and
resolutions, alerts, the audit trail and the dashboard's sessions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from redrive.core.job import DeadLetter
from redrive.errors import DeadLetterNotFound
from redrive.store.postgres.codecs import _dead_letter
from redrive.store.postgres.work import Work
from redrive.store.reads import AuditEntry


class Operations(Work):
    def jobs_delete(self, *, job_ids: Sequence[UUID]) -> list[UUID]:
        if not job_ids:
            return []
        return [row["id"] for row in self._run("jobs_delete", {"ids": list(job_ids)})]

    def queue_pause(self, *, queue: str, by: str) -> bool:
        return bool(self._run("queue_pause", {"queue": queue, "by": by}))

    def queue_resume(self, *, queue: str) -> bool:
        return bool(self._run("queue_resume", {"queue": queue}))

    def dead_letter_note(self, *, id: int, text: str, by: str | None) -> DeadLetter:
        rows = self._run("dead_letter_note", {"id": id, "text": text, "by": by})
        if not rows:
            raise DeadLetterNotFound(f"no dead letter has id {id}")
        return _dead_letter(rows[0])

    def dead_letters_resolve(self, *, ids: Sequence[int], by: str | None, note: str | None = None) -> list[DeadLetter]:
        rows = self._run("dead_letters_resolve", {"ids": list(ids), "by": by, "note": note})
        return sorted((_dead_letter(row) for row in rows), key=lambda d: d.id)

    def schedule_pause(self, *, name: str, by: str, now: datetime) -> bool:
        return bool(self._run("schedule_pause", {"name": name, "by": by, "now": now}))

    def schedule_resume(self, *, name: str) -> bool:
        return bool(self._run("schedule_resume", {"name": name}))

    def alert_fire(self, *, rule: str, incident: str, detail: str) -> bool:
        return bool(self._run("alert_fire", {"rule": rule, "incident": incident, "detail": detail}))

    def alert_resolve(self, *, rule: str, incident: str) -> bool:
        return bool(self._run("alert_resolve", {"rule": rule, "incident": incident}))

    def audit_record(self, *, by: str, action: str, job_id: UUID | None = None,
                     detail: dict[str, Any] | None = None) -> AuditEntry:
        rows = self._run("audit_record", {"by": by, "action": action, "job_id": job_id,
                                          "detail": Jsonb(detail or {})})
        return AuditEntry(**rows[0])

    def session_open(self, *, id: str, principal: str, ttl: timedelta) -> None:
        self._run("session_open", {"id": id, "principal": principal, "ttl": ttl})

    def session_read(self, *, id: str) -> str | None:
        rows = self._run("session_read", {"id": id})
        return rows[0]["principal"] if rows else None

    def session_close(self, *, id: str) -> None:
        self._run("session_close", {"id": id})
