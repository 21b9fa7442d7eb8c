"""How a worker keeps its word on its leases: a heartbeat on a thread of its
own extends them every third of the TTL; a lease found gone, or not extended
for a whole TTL (the database silent), has its run given up at once, its
outcome dropped; the watchdog gives every job back straight to the store."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

from redrive.core.transitions import Requeue
from redrive.declarations import Registry
from redrive.errors import StoreError
from redrive.runtime.completer import Completer
from redrive.runtime.running import Running
from redrive.runtime.watchdog import Watchdog
from redrive.store.port import Store
from redrive.stream import EventStream

log = logging.getLogger("redrive.worker")


class Leases:
    # What the worker holds that this part of it uses (set up by Worker.__init__).
    id: str
    events: EventStream
    registry: Registry
    lease_ttl: timedelta
    shutdown_grace: timedelta
    _running: dict[int, Running]
    _loop: asyncio.AbstractEventLoop | None
    _stopping: asyncio.Event
    _stop_began: float | None
    _wake: asyncio.Event
    _idle: asyncio.Event
    _bounded: Callable[[], AbstractContextManager[object]]
    _call: Any  # (fn, *args, **kwargs) -> awaitable, on the database threads
    _within: Any  # (fn, *args, **kwargs) -> its answer, bounded by the worker's deadline
    _completer: Completer
    _watchdog: Watchdog | None

    @property
    def store(self) -> Store:
        raise NotImplementedError

    def _heartbeat(self, done: threading.Event) -> None:
        """Renew the leases of running jobs, on a thread of its own: an async
        task that holds the event loop must not cost every job its lease."""
        store = self.store
        with self._bounded():  # this thread's calls, for its whole life
            while not done.wait(self.lease_ttl.total_seconds() / 3):
                # list() copies in one step under the GIL: safe beside the loop's changes
                live = [r for r in list(self._running.values()) if not (r.finishing or r.lost or r.abandoned)]
                if not live:
                    continue
                asked = time.monotonic()
                try:
                    held = store.leases_extend(leases=[r.lease for r in live], lease_ttl=self.lease_ttl)
                except StoreError as exc:
                    log.warning("heartbeat failed, retrying: %s", exc)
                    continue
                for r in live:
                    if r.lease in held:
                        r.extended_at = asked
                gone = [r for r in live if r.lease not in held]
                if gone and self._loop is not None:
                    self._loop.call_soon_threadsafe(self._leases_gone, gone)

    def _leases_gone(self, gone: list[Running]) -> None:
        for r in gone:
            if not (r.finishing or r.lost):
                self._lost(r)
                log.warning("lost the lease on job %s (%s): another worker may run it", r.job.id, r.job.task)

    async def _leases_watch(self) -> None:
        """A lease not extended for a whole TTL (the database did not answer
        the heartbeats) may be another worker's by now: its run is given up
        at once, its handler told to stop and its outcome dropped, rather
        than found out when the database answers again."""
        ttl = self.lease_ttl.total_seconds()
        while True:
            await asyncio.sleep(min(0.5, ttl / 10))
            now = time.monotonic()
            # (a run given back on shutdown is not the heartbeat's any more, nor is it lost)
            for r in [r for r in self._running.values()
                      if not (r.lost or r.abandoned) and now - r.extended_at >= ttl]:
                log.warning("lost the lease on job %s (%s): it was not extended for %gs (the database did not "
                            "answer), so another worker may run it now: dropping this run", r.job.id, r.job.task, ttl)
                self._give_up(r)

    def _give_up(self, r: Running) -> None:
        """This run's lease is gone: announce it, stop its handler (an async
        one is cancelled, a sync one told through ``redrive.cancelled()``)
        and wait for none of its writes."""
        self._lost(r)
        if r.finishing:
            self._completer.drop(r.lease)
            return
        r.abandoned = True
        r.interrupt.shutdown()
        if r.future is not None:
            r.future.cancel()

    def _give_back(self) -> int:
        """For the watchdog, from its thread: requeue every job held, straight to the store."""
        items = [Requeue(r.lease) for r in list(self._running.values()) if not r.lost]
        return len(self._within(self.store.jobs_finish, items)) if items else 0

    def _lost(self, running: Running) -> None:
        running.lost = True
        job = running.job
        self.events.emit("job.lease_lost", job_id=str(job.id), task=job.task, queue=job.queue,
                         lease_token=str(job.lease_token), worker=self.id)
