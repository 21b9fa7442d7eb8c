"""The operator API on what operators control: the queues (their counts,
throughput and charts, pausing one), the breakers, the schedules, the
outbox, the workers, and pruning history."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from uuid import UUID

from redrive.admin.actor import Acting
from redrive.admin.results import BreakerStatus
from redrive.client import Client, firing_request
from redrive.core import checks
from redrive.core.breaker import Breaker, force_closed, force_open
from redrive.core.job import EnqueueResult
from redrive.core.outbox import OutboxRow, OutboxStatus
from redrive.core.rollups import Series, Window, series, window_named
from redrive.core.states import ACTIVE_ORDER, Status
from redrive.declarations import Registry
from redrive.errors import ConfigError, UnknownDependency
from redrive.store.port import BreakerEvent
from redrive.store.reads import MinuteCount, Page, QueueStats, ScheduleState, WorkerInfo

_FINAL = ("succeeded", "failed", "cancelled")  # the endings of a job, not of one attempt


class Controls(Acting):
    # -- queues ------------------------------------------------------------------

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
        return BreakerStatus(name, breaker, now[-1])

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

