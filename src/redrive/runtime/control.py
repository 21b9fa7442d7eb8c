"""What every worker obeys, read from the store twice a second: the queues
an operator paused (no job of them starts), and the cancels asked of the
jobs this worker runs (an async run is cancelled, a sync one told)."""

from __future__ import annotations

import asyncio
import logging

from redrive.errors import StoreError
from redrive.runtime.leases import Leases

log = logging.getLogger("redrive.worker")

CONTROL_INTERVAL_S = 0.5  # how often a worker reads pauses and cancel requests


class Control(Leases):
    queues: list[str]
    _paused: frozenset[str]

    async def _control(self) -> None:
        while True:
            await asyncio.sleep(CONTROL_INTERVAL_S)
            await self._read_control()

    async def _read_control(self) -> None:
        """What every worker obeys: the paused queues, and the cancels asked of
        the jobs this worker runs."""
        live = [r for r in self._running.values() if not (r.finishing or r.abandoned)]
        try:
            control = await self._call(self.store.control_read, job_ids=[r.job.id for r in live])
        except StoreError as exc:
            log.warning("reading pauses and cancels failed, retrying: %s", exc)
            return
        for r in live:
            by = control.cancels.get(r.job.id)
            if by is not None and r.interrupt.cancel_by is None and not r.finishing:
                task = self.registry.tasks.get(r.job.task)
                log.info("job %s (%s): cancel asked by %s, stopping it", r.job.id, r.job.task, by)
                r.interrupt.cancel(by, is_async=task is not None and task.is_async)
        paused = frozenset(q for q in control.paused if q in self.queues)
        for queue in sorted(paused - self._paused):
            log.info("queue %s paused by %s: no job of it starts here until it is resumed",
                     queue, control.paused[queue])
        for queue in sorted(self._paused - paused):
            log.info("queue %s resumed", queue)
        if self._paused - paused:
            self._wake.set()
        self._paused = paused

