"""An operator's and a service's asks, in memory: deleting jobs, pausing
queues and schedules, dead letters' notes and resolutions, alerts, the
audit trail and sessions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from redrive.core.job import DeadLetter
from redrive.core.states import TERMINAL
from redrive.errors import DeadLetterNotFound
from redrive.store.memory.work import Work
from redrive.store.reads import AuditEntry


class Operations(Work):
    def jobs_delete(self, *, job_ids: Sequence[UUID]) -> list[UUID]:
        with self._lock:
            gone = {i for i in job_ids if i in self._jobs and self._jobs[i].status in TERMINAL}
            self._forget(gone)
        return [i for i in dict.fromkeys(job_ids) if i in gone]

    def queue_pause(self, *, queue: str, by: str) -> bool:
        with self._lock:
            if queue in self._paused:
                return False
            self._paused[queue] = by
            return True

    def queue_resume(self, *, queue: str) -> bool:
        with self._lock:
            return self._paused.pop(queue, None) is not None

    def schedule_pause(self, *, name: str, by: str, now: datetime) -> bool:
        with self._lock:
            if self._schedule_paused.get(name) is not None:
                return False
            self._schedules.setdefault(name, now)
            self._schedule_paused[name] = by
            self._schedule_updated[name] = self._clock()
            return True

    def schedule_resume(self, *, name: str) -> bool:
        with self._lock:
            if self._schedule_paused.pop(name, None) is None:
                return False
            self._schedule_updated[name] = self._clock()
            return True

    def dead_letter_note(self, *, id: int, text: str, by: str | None) -> DeadLetter:
        with self._lock:
            letter = self._letters.get(id)
            if letter is None:
                raise DeadLetterNotFound(f"no dead letter has id {id}")
            note = {"at": self._clock().isoformat(), "by": by, "text": text}
            self._letters[id] = replace(letter, notes=[*letter.notes, note])
            return self._letters[id]

    def dead_letters_resolve(self, *, ids: Sequence[int], by: str | None, note: str | None = None) -> list[DeadLetter]:
        with self._lock:
            now = self._clock()
            done = []
            for letter in (self._letters.get(i) for i in dict.fromkeys(ids)):
                if letter is not None and letter.state == "open":
                    notes = [*letter.notes, {"at": now.isoformat(), "by": by, "text": note}] if note else letter.notes
                    self._letters[letter.id] = replace(letter, resolved_at=now, resolved_by=by, notes=notes)
                    done.append(self._letters[letter.id])
            return done

    def alert_fire(self, *, rule: str, incident: str, detail: str) -> bool:
        with self._lock:
            if rule in self._alerts:
                return False
            self._alerts[rule] = incident
            return True

    def alert_resolve(self, *, rule: str, incident: str) -> bool:
        with self._lock:
            if self._alerts.get(rule) != incident:
                return False
            del self._alerts[rule]
            return True

    def audit_record(self, *, by: str, action: str, job_id: UUID | None = None,
                     detail: dict[str, Any] | None = None) -> AuditEntry:
        with self._lock:
            entry = AuditEntry(len(self._audit) + 1, self._clock(), by, action, job_id, dict(detail or {}))
            self._audit.append(entry)
            return entry

    def session_open(self, *, id: str, principal: str, ttl: timedelta) -> None:
        now = self._clock()
        with self._lock:
            self._sessions = {k: v for k, v in self._sessions.items() if v[1] >= now}
            self._sessions[id] = (principal, now + ttl)

    def session_read(self, *, id: str) -> str | None:
        with self._lock:
            found = self._sessions.get(id)
        return found[0] if found is not None and found[1] > self._clock() else None

    def session_close(self, *, id: str) -> None:
        with self._lock:
            self._sessions.pop(id, None)
