"""The operator API: what a person or a service may do to jobs, dead letters
and breakers, acting as one principal.

Every authorization rule lives here, so the CLI, the HTTP API and the
dashboard cannot disagree:

- an **operator** may do everything;
- an **owner** (a user whose jobs carry their ``owner``) may read, retry and
  cancel their own jobs, and nothing of anyone else's: another owner's job
  answers ``Forbidden``, with no data of it;
- dead letters, breakers, the outbox and pruning are for operators only.

Every action records who did it (``Actor.name``) in the job's events, the
dead letter or the breaker's history.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any
from uuid import UUID

from redrive.client import Client, firing_request, job_filter, read_job
from redrive.core import checks
from redrive.core.breaker import Breaker, force_closed, force_open, time_open
from redrive.core.dead_letters import MANUAL_RETRY, REPLAY, Revival, revive_plan
from redrive.core.job import LETTER_STATES, DeadLetter, DeadLetterFilter, EnqueueResult, Job, JobEvent
from redrive.core.outbox import OutboxRow, OutboxStatus
from redrive.core.rollups import Series, Window, series, window_named
from redrive.core.states import ACTIVE_ORDER, Status
from redrive.declarations import Registry
from redrive.errors import ConfigError, DeadLetterNotFound, Forbidden, IllegalTransition, JobNotFound, UnknownDependency
from redrive.events import EventStream
from redrive.settings import Settings
from redrive.store.port import BreakerEvent
from redrive.store.reads import (
    AuditEntry,
    DeadLetterFacets,
    MinuteCount,
    Page,
    QueueStats,
    Reads,
    ScheduleState,
    WorkerInfo,
)
from redrive.store.url import open_store

_NOTE_LIMIT = 2000
_FINAL = ("succeeded", "failed", "cancelled")  # the endings of a job, not of one attempt


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is acting: an operator, a read-only operator (who sees what an
    operator sees and acts on nothing), or someone acting for one ``owner``.
    ``name`` goes into the audit trail (events, notes, breaker history)."""

    name: str
    owner: str | None = None  # None: an operator
    read_only: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError("an actor needs a name for the audit trail")
        if self.owner is not None and (not isinstance(self.owner, str) or not self.owner):
            raise ConfigError("an owner is a non-empty string")
        if self.read_only and self.owner is not None:
            raise ConfigError("a read-only actor is an operator who acts on nothing, not an owner")

    @classmethod
    def operator(cls, name: str) -> Actor:
        return cls(name=name)

    @classmethod
    def viewer(cls, name: str) -> Actor:
        """A read-only operator: every page and list, no action."""
        return cls(name=name, read_only=True)

    @classmethod
    def acting_for(cls, owner: str, *, name: str | None = None) -> Actor:
        """An owner acting on their own jobs (``name`` defaults to ``owner:<owner>``)."""
        return cls(name=name or f"owner:{owner}", owner=owner)

    @property
    def is_operator(self) -> bool:
        return self.owner is None


@dataclass(frozen=True, slots=True)
class BreakerStatus:
    """One breaker as an operator sees it, read at the database's clock."""

    name: str
    breaker: Breaker
    at: float  # the database's clock when read (epoch seconds)

    @property
    def state(self) -> str:
        return self.breaker.state.value

    @property
    def seconds_open(self) -> float:
        return time_open(self.breaker, self.at)


# What each bulk action applies to.
BULK_ACTIONS: dict[str, tuple[Status, ...]] = {
    "retry": (Status.FAILED,),
    "cancel": (Status.SCHEDULED, Status.QUEUED, Status.RUNNING),
    "delete": (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED),
}


@dataclass(frozen=True, slots=True)
class Bulk:
    """What an action on every job a filter matched did (or, dry, would do)."""

    action: str
    matched: int  # jobs the filter matched, of those the action applies to
    done: int  # acted on: 0 on a dry run
    skipped: int  # changed by someone else between the listing and the action
    dry_run: bool


@dataclass(frozen=True, slots=True)
class Replay:
    """What replaying one dead letter did."""

    letter: DeadLetter
    job: Job | None  # the queued job; None when the letter had been replayed already

    @property
    def replayed(self) -> bool:
        return self.job is not None


@dataclass(frozen=True, slots=True)
class Resolve:
    """What resolving one dead letter did."""

    letter: DeadLetter  # as it now stands
    resolved: bool  # closed by this call; False when it had been replayed or resolved already


class Admin:
    """Operator actions on one store, as ``actor``. Works from a database
    alone (``Admin.open(url, actor=...)``); with the application's ``registry``
    it also knows declared dependencies not used yet and each task's first
    stage (a replay from the start then shows where it resumes)."""

    def __init__(self, store: Reads, *, actor: Actor, registry: Registry | None = None,
                 events: EventStream | None = None) -> None:
        if not isinstance(actor, Actor):
            raise ConfigError("Admin acts as an Actor: Actor.operator(name) or Actor.acting_for(owner)")
        self.store = store
        self.actor = actor
        self.registry = registry
        self.events = events or EventStream()
        self._owns_store = False

    @classmethod
    def open(cls, database_url: str, *, actor: Actor, registry: Registry | None = None,
             settings: Settings | None = None) -> Admin:
        """An admin on its own store, closed with it; ``settings``: how to
        reach PostgreSQL (``store_timeout``, ``database_pool_mode``, ``listen_url``)."""
        admin = cls(open_store(database_url, must_exist=True, settings=settings), actor=actor, registry=registry)
        admin._owns_store = True
        return admin

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    # -- the rules -------------------------------------------------------------

    def _operator_only(self, what: str) -> None:
        if not self.actor.is_operator:
            raise Forbidden(f"only an operator may {what}")

    def _acting(self, what: str, *, operator: bool = True) -> None:
        """A change: refused to a read-only operator, and (``operator``) to owners."""
        if operator:
            self._operator_only(what)
        if self.actor.read_only:
            raise Forbidden(f"a read-only operator may not {what}")

    def _may_touch(self, job: Job) -> Job:
        if not self.actor.is_operator and job.owner != self.actor.owner:
            raise Forbidden(f"job {job.id} belongs to someone else; only its owner or an operator may act on it")
        return job

    # -- jobs ------------------------------------------------------------------

    def job(self, job_id: UUID | str) -> Job:
        return self._may_touch(read_job(self.store, job_id))

    def jobs(
        self,
        *,
        status: Status | Sequence[Status] | None = None,
        queue: str | None = None,
        task: str | None = None,
        owner: str | None = None,
        error_code: str | None = None,
        idempotency_key: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        after: str | None = None,
        limit: int = 50,
    ) -> Page[Job]:
        """A page of jobs, newest first (``after``: the previous page's
        ``next_cursor``). An owner sees only their own jobs."""
        if not self.actor.is_operator:
            if owner is not None and owner != self.actor.owner:
                raise Forbidden("an owner may list only their own jobs")
            owner = self.actor.owner
        where = job_filter(status=status, queue=queue, task=task, owner=owner, error_code=error_code,
                           idempotency_key=idempotency_key, created_after=created_after,
                           created_before=created_before)
        return self.store.jobs_page(where=where, after=after, limit=limit)

    def queues(self, *, exact_up_to: int | None = None) -> list[QueueStats]:
        """Each queue's active jobs by state, its oldest due job's wait, and
        who paused it (a paused queue is listed even when it holds no job).
        Waiting counts are exact up to ``exact_up_to`` at least (past it, an
        estimate or a bound, marked: ``QueueStats``)."""
        self._operator_only("see the queues")
        paused = self.store.control_read(job_ids=[]).paused
        stats = {q.queue: replace(q, paused_by=paused.get(q.queue))
                 for q in self.store.queues_stats(exact_up_to=exact_up_to)}
        for queue, by in paused.items():
            stats.setdefault(queue, QueueStats(queue, dict.fromkeys(ACTIVE_ORDER, 0), paused_by=by))
        return [stats[name] for name in sorted(stats)]

    def finished_per_minute(self, minutes: int = 60) -> list[MinuteCount]:
        """Jobs that ended in the last ``minutes`` (whole minutes, this one
        included), per queue, minute and outcome, oldest first."""
        self._operator_only("see the queues")
        if not 1 <= minutes <= 1440:
            raise ConfigError(f"minutes is 1 to 1440, not {minutes}")
        now = self.store.now()
        since = now.replace(second=0, microsecond=0) - timedelta(minutes=minutes - 1)
        counts: Counter[tuple[datetime, str, str]] = Counter()
        for row in self.store.rollups_read(since=since, by="queue", timed=False):
            if row.kind in _FINAL:
                counts[(row.at, row.key, row.kind)] += row.n
        return [MinuteCount(queue, at, Status(kind), n) for (at, queue, kind), n in sorted(counts.items())]

    def charts(self, window: str = "1h", *, by: str = "queue") -> tuple[list[Series], Window, datetime]:
        """Per queue (or per task, ``by="task"``), the attempts that ended in
        each slot of ``window`` (1h, 24h or 7d) by how they ended, with their
        durations' and waits' buckets; read from the rollups, never from
        history, so pruning jobs leaves them. With the window and the store's
        time now."""
        self._operator_only("see the queues")
        chosen, now = window_named(window), self.store.now()
        rows = self.store.rollups_read(since=chosen.start(now), slot=chosen.slot, by=by)
        return series(((r.at, r.key, r.kind, r.bucket, r.n) for r in rows), chosen, now), chosen, now

    def pause_queue(self, queue: str) -> bool:
        """No worker starts a job of ``queue`` until it is resumed (every
        worker sees it within a second; running jobs go on). False when it
        was paused already. On the audit trail."""
        self._acting("pause a queue")
        paused = self.store.queue_pause(queue=checks.queue_name(queue), by=self.actor.name)
        if paused:
            self.store.audit_record(by=self.actor.name, action="pause_queue", detail={"queue": queue})
            self.events.emit("queue.paused", queue=queue, by=self.actor.name)
        return paused

    def resume_queue(self, queue: str) -> bool:
        """Workers claim from ``queue`` again. False when it was not paused."""
        self._acting("resume a queue")
        resumed = self.store.queue_resume(queue=checks.queue_name(queue))
        if resumed:
            self.store.audit_record(by=self.actor.name, action="resume_queue", detail={"queue": queue})
            self.events.emit("queue.resumed", queue=queue, by=self.actor.name)
        return resumed

    def reveal(self, job_id: UUID | str) -> Job:
        """The job with what it was given, for a view that shows its original
        arguments (``views.job_view(job, reveal=True)``): operators only, and
        put on record with who looked (the job's audit trail)."""
        self._acting("reveal a job's arguments")
        job = self.job(job_id)
        self.store.audit_record(by=self.actor.name, action="reveal", job_id=job.id, detail={"fields": ["args", "kwargs"]})
        self.events.emit("job.revealed", job_id=str(job.id), task=job.task, queue=job.queue, by=self.actor.name)
        return job

    def audit_trail(self, job_id: UUID | str | None = None) -> list[AuditEntry]:
        """Who revealed what of a job, oldest first; without a job, the
        actions on no one job (queue pauses, bulk actions), the latest 1,000."""
        self._operator_only("read the audit trail")
        return self.store.audits_list(job_id=None if job_id is None else self.job(job_id).id)

    def job_events(self, job_id: UUID | str) -> list[JobEvent]:
        """The job's history, oldest first: one event per state change."""
        job = self.job(job_id)
        return self.store.job_events_list(job_id=job.id)

    def retry(self, job_id: UUID | str) -> Job:
        """Manual retry of a failed job: queued again with fresh attempts, at the
        stage that failed."""
        self._acting("retry a job", operator=False)
        job = self.job(job_id)
        if job.status is not Status.FAILED:
            raise IllegalTransition(f"job {job.id} is {job.status}; only a failed job can be retried")
        (revived,) = self._revive([job])
        if revived is None:
            raise IllegalTransition(f"job {job.id} was retried or replayed by someone else just now")
        return revived

    def _revive(self, jobs: Sequence[Job]) -> list[Job | None]:
        """Manual retries of failed ``jobs``, in one store call; each one revived announced."""
        revived = self.store.jobs_revive(revivals=[
            Revival(job.id, revive_plan(job, reason=MANUAL_RETRY, by=self.actor.name)) for job in jobs])
        for job in revived:
            if job is not None:
                self.events.emit("job.retried", job_id=str(job.id), task=job.task, queue=job.queue, by=self.actor.name)
        return revived

    def cancel(self, job_id: UUID | str) -> Job:
        """A scheduled or queued job ends ``cancelled`` at once. A running one
        is stopped by its worker within a second or so (an async task is
        cancelled; a sync one sees ``redrive.cancelled()`` turn true) and ends
        ``cancelled`` then: the job returned is still ``running``. Either way
        its events say who cancelled it."""
        self._acting("cancel a job", operator=False)
        return self._cancel(self.job(job_id))

    def bulk(
        self,
        action: str,
        *,
        dry_run: bool = False,
        status: Status | Sequence[Status] | None = None,
        queue: str | None = None,
        task: str | None = None,
        owner: str | None = None,
        error_code: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        batch: int = 500,
    ) -> Bulk:
        """``action`` ("retry", "cancel" or "delete") on every job the filter
        matches, among those it applies to (retry: failed; cancel: scheduled,
        queued, running; delete: finished), ``batch`` at a time. An owner acts on their own jobs only.
        A job someone else changed meanwhile is skipped. Stopped halfway, the
        same call again finishes the rest: what was done no longer matches.
        One entry on the audit trail with the filter and the counts; a
        ``dry_run`` only counts."""
        self._acting(f"{action} jobs", operator=False)
        if action not in BULK_ACTIONS:
            raise ConfigError(f"a bulk action is {' or '.join(BULK_ACTIONS)}, not {action!r}")
        applies = BULK_ACTIONS[action]
        wanted = job_filter(status=status).statuses or applies
        if not set(wanted) <= set(applies):
            raise ConfigError(f"{action} acts on {', '.join(applies)} jobs, not {', '.join(sorted(set(wanted) - set(applies)))}")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ConfigError("batch must be a positive integer")
        if not self.actor.is_operator:
            if owner is not None and owner != self.actor.owner:
                raise Forbidden("an owner may act only on their own jobs")
            owner = self.actor.owner
        where = job_filter(status=list(wanted), queue=queue, task=task, owner=owner, error_code=error_code,
                           created_after=created_after, created_before=created_before)
        matched = done = 0
        after = None
        while True:
            page = self.store.jobs_page(where=where, after=after, limit=batch)
            matched += len(page.items)
            if not dry_run and action == "delete":
                done += len(self._delete([self._may_touch(job) for job in page.items], on_record=False))
            elif not dry_run and action == "retry":  # a page in one call; one retried meanwhile is skipped
                done += sum(job is not None for job in self._revive([self._may_touch(job) for job in page.items]))
            elif not dry_run:
                done += sum(1 for job in page.items if self._bulk_one(action, self._may_touch(job)))
            if page.next_cursor is None:
                break
            after = page.next_cursor
        result = Bulk(action, matched, done, matched - done if not dry_run else 0, dry_run)
        if not dry_run:
            described = {k: (v.isoformat() if isinstance(v, datetime) else list(v) if isinstance(v, tuple) else v)
                         for k, v in asdict(where).items() if v is not None}
            self.store.audit_record(by=self.actor.name, action=f"bulk_{action}",
                                    detail={"filter": described, "count": done, "skipped": result.skipped})
        return result

    def _bulk_one(self, action: str, job: Job) -> bool:
        try:
            self._cancel(job)
            return True
        except (IllegalTransition, JobNotFound):  # ended or gone meanwhile
            return False

    def delete(self, job_id: UUID | str) -> None:
        """Delete a finished job now, with its events, dead letters and keys
        (an idempotency key can then be used afresh), as a prune would; on
        the audit trail. A job still waiting or running is refused (cancel it)."""
        self._acting("delete a job", operator=False)
        job = self.job(job_id)
        if job.status not in BULK_ACTIONS["delete"]:
            raise IllegalTransition(f"job {job.id} is {job.status}; only a finished job can be deleted (cancel it first)")
        if not self._delete([job]):
            raise JobNotFound(f"no job has id {job.id}")

    def _delete(self, jobs: list[Job], *, on_record: bool = True) -> list[UUID]:
        """``on_record``: an entry per job (a bulk delete writes one for all)."""
        gone = self.store.jobs_delete(job_ids=[job.id for job in jobs])
        about = {job.id: job for job in jobs}
        for job_id in gone if on_record else ():
            self.store.audit_record(by=self.actor.name, action="delete", job_id=job_id,
                                    detail={"task": about[job_id].task, "status": str(about[job_id].status)})
        return gone

    def _cancel(self, job: Job) -> Job:
        cancelled = self.store.job_cancel(job_id=job.id, by=self.actor.name)
        about = {"job_id": str(job.id), "task": job.task, "queue": job.queue, "by": self.actor.name}
        if cancelled.status is Status.CANCELLED:
            self.events.emit("job.cancelled", **about)
        else:
            self.events.emit("job.cancel_requested", **about)
        return cancelled

    # -- dead letters ------------------------------------------------------------

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

    # -- circuit breakers ----------------------------------------------------------

    def breakers(self) -> dict[str, BreakerStatus]:
        """Every breaker the store knows, and the registry's declared ones not yet used."""
        self._operator_only("see the breakers")
        stored, now = self.store.breakers_list()
        declared = set(self.registry.dependencies) if self.registry else set()
        return {n: BreakerStatus(n, stored.get(n, Breaker()), now) for n in sorted(set(stored) | declared)}

    def breaker_history(self, name: str) -> list[BreakerEvent]:
        """A breaker's state changes, oldest first: when it opened and closed, why, and who forced it."""
        self._operator_only("see the breakers")
        return self.store.breaker_events_list(name=name)

    def open_breaker(self, name: str) -> BreakerStatus:
        """Force a breaker open: it stays open until closed by hand."""
        return self._force(name, force_open)

    def close_breaker(self, name: str) -> BreakerStatus:
        """Close a breaker with a fresh window (and lift a forced open)."""
        return self._force(name, force_closed)

    def _force(self, name: str, change: Callable[[Breaker, float], Breaker]) -> BreakerStatus:
        self._acting("force a breaker")
        stored = self.store.breakers_list()[0]
        if name not in stored:
            if self.registry is not None:
                self.registry.dependency(name)  # raises with the declared names
            else:
                known = ", ".join(sorted(stored)) or "none"
                raise UnknownDependency(
                    f"this database has no breaker named {name!r} (known: {known}); "
                    "to force a declared dependency no job has used yet, pass --app")
        now: list[float] = []

        def apply(b: Breaker, at: float) -> Breaker:
            now.append(at)
            return change(b, at)

        breaker = self.store.breaker_update(name=name, change=apply, by=self.actor.name)
        for before, after, reason in breaker.changes:
            self.events.emit("breaker.changed", dependency=name, from_state=before.value, to_state=after.value,
                             reason=reason)
        return BreakerStatus(name, breaker, now[0])

    # -- outbox and history --------------------------------------------------------

    def outbox(
        self, *, status: OutboxStatus | str | None = None, job_id: UUID | str | None = None,
        after: str | None = None, limit: int = 50,
    ) -> Page[OutboxRow]:
        """A page of outbox rows, oldest first: ``status="failed"`` lists what awaits an operator."""
        self._operator_only("read the outbox")
        try:
            wanted = None if status is None else OutboxStatus(status)
        except ValueError:
            raise ConfigError(f"outbox status must be one of {', '.join(OutboxStatus)}, not {status!r}") from None
        return self.store.outbox_page(
            status=wanted, job_id=None if job_id is None else checks.job_uuid(job_id), after=after, limit=limit)

    def schedules(self) -> list[ScheduleState]:
        """How far each schedule has fired."""
        self._operator_only("see the schedules")
        return self.store.schedules_list()

    def pause_schedule(self, name: str) -> bool:
        """Schedulers skip ``name``'s firings until it is resumed (within a
        tick); what it would have fired meanwhile is skipped, not caught up.
        False when it was paused already. On the audit trail."""
        self._acting("pause a schedule")
        self._schedule_named(name)
        paused = self.store.schedule_pause(name=name, by=self.actor.name, now=self.store.now())
        if paused:
            self.store.audit_record(by=self.actor.name, action="pause_schedule", detail={"schedule": name})
        return paused

    def resume_schedule(self, name: str) -> bool:
        """``name`` fires again from its next time. False when it was not paused."""
        self._acting("resume a schedule")
        resumed = self.store.schedule_resume(name=name)
        if resumed:
            self.store.audit_record(by=self.actor.name, action="resume_schedule", detail={"schedule": name})
        return resumed

    def _schedule_named(self, name: str) -> None:
        known = set(self.registry.schedules) if self.registry else set()
        if name not in known and name not in {s.name for s in self.store.schedules_list()}:
            raise ConfigError(f"no schedule named {name!r}")

    def run_schedule(self, name: str, *, run: str) -> list[EnqueueResult]:
        """Fire schedule ``name`` now, outside its times: one job per time
        zone (and entity) under keys of this ``run``'s own, so sending the
        same ``run`` again (a form sent twice) makes nothing more. Its
        regular firings go on as before. Needs the app's declarations; on
        the audit trail."""
        self._acting("run a schedule")
        schedule = self.registry.schedules.get(name) if self.registry else None
        if schedule is None:
            raise ConfigError(f"no schedule named {name!r} is declared in this app")
        firings = schedule.fired_now(self.store.now(), run)
        client = Client(self.registry or Registry(), store=self.store, events=self.events)
        made = client.enqueue_many([firing_request(schedule, firing) for firing in firings])
        created = sum(not r.duplicate for r in made)
        if created:
            self.store.audit_record(by=self.actor.name, action="run_schedule",
                                    detail={"schedule": name, "run": run, "jobs": created})
        return made

    def workers(self) -> tuple[list[WorkerInfo], datetime]:
        """Every registered worker, oldest first, and the store's time now
        (a worker whose heartbeat is older than WORKER_STALE_AFTER_S is stale)."""
        self._operator_only("see the workers")
        return self.store.workers_list(), self.store.now()

    def prune(self, older_than: timedelta, *, batch: int = 10_000) -> int:
        """Delete history: finished jobs that finished more than ``older_than``
        ago, with their events, their handled dead letters and their
        idempotency keys, so a key can be used afresh once its job is gone. A
        failed job whose dead letter is still open is kept. Works in batches of
        ``batch``; returns how many went."""
        self._acting("prune history")
        if not isinstance(older_than, timedelta) or older_than <= timedelta(0):
            raise ConfigError("prune needs a positive age (older_than, or the job_retention setting)")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ConfigError("batch must be a positive integer")
        total = 0
        while (pruned := self.store.jobs_prune(older_than=older_than, limit=batch)):
            total += pruned
            if pruned < batch:
                break
        return total


def _letter_filter(*, state: str | None, **fields: Any) -> DeadLetterFilter:
    if state not in (None, *LETTER_STATES):
        raise ConfigError(f"state must be open, replayed, resolved or escalated, not {state!r}")
    for name, value in fields.items():
        if isinstance(value, str):
            checks.text(value, name)
    return DeadLetterFilter(state=state, **fields)
