"""The scheduler: enqueues each schedule's firings under deterministic keys.

Any number of schedulers may run (``redrive scheduler``, or inside workers):
there is no leader. Each tick reads how far a schedule has been fired, enqueues
the firings since then with the firing's key as the idempotency key (a twin
from another scheduler, a restart or a manual re-run is a duplicate, not a
second job), and only then moves the checkpoint forward.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from redrive.client import Client, firing_request
from redrive.core.job import EnqueueResult
from redrive.core.schedule import Firing, Schedule, missed
from redrive.errors import RedriveError
from redrive.runtime.plugins import Beside, Plugin

log = logging.getLogger("redrive.scheduler")

_BATCH = 500


class Scheduler(Plugin):
    def __init__(
        self,
        client: Client,
        *,
        clock: Callable[[], datetime] | None = None,
        interval: timedelta = timedelta(seconds=1),
        grace: timedelta = timedelta(minutes=1),
    ) -> None:
        """Enqueues the schedules of ``client``'s registry through it. ``clock``
        defaults to the database's, so every scheduler agrees; a firing older
        than ``grace`` when found counts as missed."""
        self._client = client
        self._clock = clock or (lambda: client.store.now())
        self.interval = interval
        self.grace = grace
        self._stopping = asyncio.Event()
        # (schedule name, time zone) -> (after, at): no firing in (after, at), so a
        # tick inside that window skips the cron expansion for the zone.
        self._quiet: dict[tuple[str, str], tuple[datetime, datetime]] = {}

    @property
    def schedules(self) -> Sequence[Schedule]:
        return list(self._client.registry.schedules.values())

    def tick(self, now: datetime | None = None) -> list[EnqueueResult]:
        """Enqueue what is due; a schedule that fails is retried next tick."""
        now = now or self._clock()
        made: list[EnqueueResult] = []
        try:
            paused = {s.name for s in self._client.store.schedules_list() if s.paused_by is not None}
        except RedriveError as exc:
            log.error("schedules: %s [%s]; trying again next tick", exc, exc.code)
            return made
        for schedule in self.schedules:
            try:
                made += self._fire(schedule, now, paused=schedule.name in paused)
            except RedriveError as exc:
                log.error("schedule %s: %s [%s]", schedule.name, exc, exc.code)
            except Exception:
                log.exception("schedule %s failed; trying again next tick", schedule.name)
        return made

    def _fire(self, schedule: Schedule, now: datetime, *, paused: bool = False) -> list[EnqueueResult]:
        store = self._client.store
        since = store.schedule_checkpoint(name=schedule.name, now=now)
        if now <= since:
            return []
        if paused:  # its firings meanwhile are skipped, not caught up on resume
            store.schedule_advance(name=schedule.name, to=now)
            return []
        due = [f for tz in schedule.zones()
               for f in missed(self._firings(schedule, tz, since, now), now, schedule.catch_up, self.grace)]
        requests = [firing_request(schedule, one) for firing in due for one in schedule.per_entity(firing)]
        made = []
        for start in range(0, len(requests), _BATCH):
            made += self._client.enqueue_many(requests[start:start + _BATCH])
        store.schedule_advance(name=schedule.name, to=now)
        fresh = sum(not r.duplicate for r in made)
        if due:
            self._client.events.emit("schedule.fired", schedule=schedule.name, firings=len(due),
                                     created=fresh, duplicates=len(made) - fresh)
        if made:
            log.info("schedule %s: %d firing(s), %d job(s) new, %d already there",
                     schedule.name, len(due), fresh, len(made) - fresh)
        return made

    def _firings(self, schedule: Schedule, tz: str, since: datetime, now: datetime) -> list[Firing]:
        quiet = self._quiet.get((schedule.name, tz))
        if quiet is not None and quiet[0] <= since and now < quiet[1]:
            return []
        found, upcoming = schedule.window(tz, since, now)
        if upcoming is not None:
            self._quiet[(schedule.name, tz)] = (now, upcoming.at)
        return found

    name = "scheduler"

    async def run(self, beside: Beside | None = None) -> None:
        """Tick every ``interval`` until ``stop()`` (or, beside a worker, until it stops)."""
        log.info("scheduler started with %d schedule(s)", len(self.schedules))
        while not self._stopping.is_set():
            await asyncio.to_thread(self.tick)
            try:
                await asyncio.wait_for(self._stopping.wait(), self.interval.total_seconds())
            except TimeoutError:
                pass
        log.info("scheduler stopped")

    def stop(self) -> None:
        self._stopping.set()

