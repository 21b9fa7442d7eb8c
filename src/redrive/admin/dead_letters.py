"""The operator API on dead letters (operators only): list them with their
facets, read one, annotate, replay and resolve by id or every open one a
filter matches."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import timedelta
from typing import Any
from uuid import UUID

from redrive.admin.actor import Acting
from redrive.admin.results import Bulk, Replay, Resolve
from redrive.core import checks
from redrive.core.dead_letters import REPLAY, Revival, revive_plan
from redrive.core.job import LETTER_STATES, DeadLetter, DeadLetterFilter
from redrive.core.states import Status
from redrive.errors import ConfigError, DeadLetterNotFound
from redrive.store.reads import DeadLetterFacets, Page

_NOTE_LIMIT = 2000


class DeadLetterActions(Acting):
    def dead_letters(
        self,
        *,
        error_class: str | None = None,
        stage: str | None = None,
        task: str | None = None,
        owner: str | None = None,
        state: str | None = None,
        older_than: timedelta | None = None,
        newer_than: timedelta | None = None,
        job_id: UUID | str | None = None,
        after: str | None = None,
        limit: int = 50,
    ) -> Page[DeadLetter]:
        """A page of dead letters, newest first. ``state``: "open", "replayed"
        or "escalated"; age is measured from the last failure; ``owner``
        filters by the job's owner; ``job_id``: one job's letters."""
        self._operator_only("read dead letters")
        where = _letter_filter(error_class=error_class, stage=stage, task=task, owner=owner, state=state,
                               older_than=older_than, newer_than=newer_than,
                               job_id=None if job_id is None else checks.job_uuid(job_id))
        return self.store.dead_letters_page(where=where, after=after, limit=limit)

    def dead_letter_facets(
        self,
        *,
        error_class: str | None = None,
        stage: str | None = None,
        task: str | None = None,
        owner: str | None = None,
        state: str | None = None,
        older_than: timedelta | None = None,
        newer_than: timedelta | None = None,
    ) -> DeadLetterFacets:
        """How many dead letters match, by error class and by stage."""
        self._operator_only("read dead letters")
        where = _letter_filter(error_class=error_class, stage=stage, task=task, owner=owner, state=state,
                               older_than=older_than, newer_than=newer_than)
        return self.store.dead_letter_facets(where=where)

    def dead_letter(self, dead_letter_id: int | str) -> DeadLetter:
        self._operator_only("read dead letters")
        letter = self.store.dead_letter_get(id=checks.letter_id(dead_letter_id))
        if letter is None:
            raise DeadLetterNotFound(f"no dead letter has id {dead_letter_id}")
        return letter

    def note(self, dead_letter_id: int | str, text: str) -> DeadLetter:
        """Add a resolution note to a dead letter."""
        self._acting("annotate dead letters")
        return self.store.dead_letter_note(id=checks.letter_id(dead_letter_id), text=self._note_text(text),
                                           by=self.actor.name)

    @staticmethod
    def _note_text(text: Any) -> str:
        if not isinstance(text, str) or not text.strip() or len(text) > _NOTE_LIMIT:
            raise ConfigError(f"a note must be non-empty text of at most {_NOTE_LIMIT} characters")
        checks.text(text, "a note")
        return text.strip()

    def replay(self, dead_letter_ids: Sequence[int | str], *, from_start: bool = False) -> list[Replay]:
        """Queue the jobs of open dead letters again, resuming at the failed
        stage (or from the first with ``from_start``), with fresh attempts. A
        letter replayed or resolved already is left alone (``replayed=False``)."""
        self._acting("replay dead letters")
        letters = [self.dead_letter(i) for i in dead_letter_ids]  # every id checked before any replay
        revivals: dict[UUID, Revival] = {}  # a job named by two letters is revived for the first
        for letter in letters:
            failed = self.store.job_get(job_id=letter.job_id) if letter.state == "open" else None
            if failed is not None and failed.status is Status.FAILED and failed.id not in revivals:
                plan = revive_plan(failed, reason=REPLAY, by=self.actor.name, from_start=from_start,
                                   first_stage=self.registry.first_stage(letter.task) if self.registry else None)
                revivals[failed.id] = Revival(failed.id, plan, letter.id)
        revived = dict(zip((r.dead_letter_id for r in revivals.values()),
                           self.store.jobs_revive(revivals=list(revivals.values())), strict=True))
        done = []
        for letter in letters:
            if (job := revived.pop(letter.id, None)) is not None:
                self.events.emit("job.replayed", job_id=str(job.id), task=job.task, queue=job.queue,
                                 by=self.actor.name, dead_letter_id=letter.id,
                                 replay_from="start" if from_start else "stage")
            done.append(Replay(letter=self.dead_letter(letter.id), job=job))
        return done

    def resolve(self, dead_letter_ids: Sequence[int | str], *, note: str | None = None) -> list[Resolve]:
        """Close open dead letters without running their jobs again (handled
        by hand, or not worth it), with an optional note saying why. A
        resolved letter leaves the open count and no longer holds its job
        back from pruning. A letter replayed or resolved already is left
        alone (``resolved=False``)."""
        self._acting("resolve dead letters")
        # every id checked before any change; one answer a letter, however often it is named
        letters = list({d.id: d for d in map(self.dead_letter, dead_letter_ids)}.values())
        closed = {d.id: d for d in self._resolve([d.id for d in letters],
                                                 self._note_text(note) if note is not None else None)}
        # a letter left alone is read again: someone may have closed it since it was read
        return [Resolve(closed[d.id], True) if d.id in closed else Resolve(self.dead_letter(d.id), False)
                for d in letters]

    def _resolve(self, ids: list[int], note: str | None) -> list[DeadLetter]:
        """Close the open letters among ``ids``, each announced; the letters it closed."""
        closed = self.store.dead_letters_resolve(ids=ids, by=self.actor.name, note=note)
        for letter in closed:
            self.events.emit("job.resolved", job_id=str(letter.job_id), task=letter.task, queue=letter.queue,
                             by=self.actor.name, dead_letter_id=letter.id)
        return closed

    def replay_matching(
        self,
        *,
        error_class: str | None = None,
        stage: str | None = None,
        task: str | None = None,
        owner: str | None = None,
        older_than: timedelta | None = None,
        newer_than: timedelta | None = None,
        from_start: bool = False,
        dry_run: bool = False,
        batch: int = 200,
    ) -> Bulk:
        """Replay every open dead letter the filter matches, ``batch`` at a
        time, as ``replay`` does. Stopped halfway, the same call again
        replays the rest: a replayed letter is no longer open. One entry on
        the audit trail with the filter and the count; a ``dry_run`` only counts."""
        self._acting("replay dead letters")

        def replay(ids: list[int]) -> int:
            return sum(1 for r in self.replay(ids, from_start=from_start) if r.job is not None)

        return self._letters_matching(
            "replay", replay, _letter_filter(error_class=error_class, stage=stage, task=task, owner=owner,
                                             state="open", older_than=older_than, newer_than=newer_than),
            dry_run=dry_run, batch=batch, detail={"from_start": from_start})

    def resolve_matching(
        self,
        *,
        error_class: str | None = None,
        stage: str | None = None,
        task: str | None = None,
        owner: str | None = None,
        older_than: timedelta | None = None,
        newer_than: timedelta | None = None,
        note: str | None = None,
        dry_run: bool = False,
        batch: int = 200,
    ) -> Bulk:
        """Resolve every open dead letter the filter matches, ``batch`` at a
        time, as ``resolve`` does; resumable and on the audit trail as
        ``replay_matching`` is."""
        self._acting("resolve dead letters")
        note = self._note_text(note) if note is not None else None
        return self._letters_matching(
            "resolve", lambda ids: len(self._resolve(ids, note)), _letter_filter(error_class=error_class, stage=stage, task=task, owner=owner,
                                               state="open", older_than=older_than, newer_than=newer_than),
            dry_run=dry_run, batch=batch, detail={"note": note} if note else {})

    def _letters_matching(self, action: str, act: Callable[[list[int]], int], where: DeadLetterFilter, *,
                          dry_run: bool, batch: int, detail: dict[str, Any]) -> Bulk:
        """Page through the letters ``where`` matches newest first and ``act``
        on each page (which returns how many it changed), then write one audit
        entry for all of them."""
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 1000:
            raise ConfigError("batch must be a whole number from 1 to 1000")
        matched = done = 0
        after = None
        while True:
            page = self.store.dead_letters_page(where=where, after=after, limit=batch)
            matched += len(page.items)
            if page.items and not dry_run:
                done += act([d.id for d in page.items])
            if page.next_cursor is None:
                break
            after = page.next_cursor
        result = Bulk(action, matched, done, matched - done if not dry_run else 0, dry_run)
        if not dry_run:
            described = {k: (v.total_seconds() if isinstance(v, timedelta) else v)
                         for k, v in asdict(where).items() if v is not None}
            self.store.audit_record(by=self.actor.name, action=f"bulk_{action}",
                                    detail={"filter": described, **detail, "count": done,
                                            "skipped": result.skipped})
        return result


def _letter_filter(*, state: str | None, **fields: Any) -> DeadLetterFilter:
    if state not in (None, *LETTER_STATES):
        raise ConfigError(f"state must be open, replayed, resolved or escalated, not {state!r}")
    for name, value in fields.items():
        if isinstance(value, str):
            checks.text(value, name)
    return DeadLetterFilter(state=state, **fields)
