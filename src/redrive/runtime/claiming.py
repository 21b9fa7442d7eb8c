"""How a worker takes work: claiming due jobs in batches as slots free
(each queue with a limit of its own apart, the rest together), skipping
paused queues, waiting to be woken rather than polling hard, and leaving
once its limits say it should be replaced (a supervisor's child, recycled)."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import Any

from redrive.core.job import Job
from redrive.errors import StoreError
from redrive.runtime.breakers import BreakerGate
from redrive.runtime.completer import STORE_RETRY_PAUSE_S
from redrive.runtime.link import Link
from redrive.runtime.presence import memory_bytes
from redrive.runtime.running import Running
from redrive.runtime.shutdown import Stopping
from redrive.runtime.threads import DaemonThreadPool

log = logging.getLogger("redrive.worker")


class Claiming(Stopping):
    concurrency: int
    poll_interval: timedelta
    max_orphans: int
    _groups: list[tuple[list[str], int | None]]
    _limits: list[Any]
    _own: frozenset[str]
    _max_jobs: int | None
    _max_memory: int | None
    _claimed: int
    _retiring: str | None
    _capped: bool
    _any_async: bool
    _link: Link | None
    _threads: DaemonThreadPool
    _gate: BreakerGate

    def _start(self, job: Job, asked: float) -> None:
        raise NotImplementedError

    def _announce_claim(self, job: Job) -> None:
        raise NotImplementedError

    async def _claim_loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            if self._retiring is None:
                self._retiring = self._past_limits()
            if self._retiring is not None:
                if not self._running:  # all it took finished and written: time to be replaced
                    log.info("worker %s %s: leaving to be replaced", self.id, self._retiring)
                    if self._link is not None:
                        self._link.leaving(self._retiring)
                    return
                await self._pause(self.poll_interval.total_seconds())
                continue
            if self._orphans_capped() and not self._any_async:  # every job it could claim is a sync one
                await self._pause(self.poll_interval.total_seconds())
                continue
            more = False
            for (queues, limit), shared in zip(self._groups, self._limits, strict=True):
                open_queues = [q for q in queues if q not in self._paused]
                if limit is None:
                    free = self._free_slots()
                elif queues[0] in self._own:
                    free = limit - self._handling(queues[0])
                else:
                    free = min(self._free_slots(), limit - self._handling(queues[0]))
                if self._max_jobs is not None:
                    free = min(free, self._max_jobs - self._claimed)
                if not open_queues or free <= 0:
                    continue
                asked = time.monotonic()
                try:
                    claimed = await self._call(
                        self.store.jobs_claim, queues=open_queues, limit=free,
                        worker_id=self.id, lease_ttl=self.lease_ttl, blocked=self._gate.blocked(),
                        limits=shared or None,
                    )
                except StoreError as exc:
                    log.warning("claim failed, retrying: %s", exc)
                    await self._pause(STORE_RETRY_PAUSE_S)
                    break
                announce = self.events.wants("job.claimed")
                self._claimed += len(claimed)
                for job in claimed:
                    if announce:
                        self._announce_claim(job)
                    self._start(job, asked)
                more = more or len(claimed) == free  # the queue may hold more: claim again at once
            if not more:
                await self._pause(self.poll_interval.total_seconds())

    def _past_limits(self) -> str | None:
        """Why this worker should claim no more and be replaced, if it should."""
        if self._max_jobs is not None and self._claimed >= self._max_jobs:
            return f"ran its {self._max_jobs} jobs"
        if self._max_memory is not None and (used := memory_bytes()) >= self._max_memory:
            return f"uses {used / 2**20:.0f} MiB, past its limit of {self._max_memory / 2**20:.0f} MiB"
        return None

    def _orphans_capped(self) -> bool:
        """Whether as many sync runs as allowed were abandoned and run on
        (said once each way)."""
        capped = self._threads.orphaned >= self.max_orphans
        if capped != self._capped:
            self._capped = capped
            if capped:
                log.warning("worker %s: %d threads of abandoned sync runs still run (the cap, "
                            "REDRIVE_WORKER_MAX_ORPHANS): it starts no sync job until one returns; restart it, "
                            "or run --processes with hard_timeout= so such runs are killed",
                            self.id, self._threads.orphaned)
            else:
                log.info("worker %s: an orphaned thread returned; sync jobs start here again", self.id)
        return capped

    def _handling(self, queue: str) -> int:
        return sum(1 for r in self._running.values() if not r.finishing and r.job.queue == queue)

    def _free_slots(self) -> int:
        """A slot frees when its handler returns, so the next claim overlaps the
        last batch's outcome write. Leases held while writes are under way
        are capped at another ``concurrency``, for a store slow to take them."""
        if self._own:  # redrive's own jobs hold slots of their own
            runs = [r for r in self._running.values() if r.job.queue not in self._own]
            handling = sum(1 for r in runs if not r.finishing)
            return min(self.concurrency - handling, 2 * self.concurrency - len(runs))
        handling = sum(1 for r in self._running.values() if not r.finishing)
        return min(self.concurrency - handling, 2 * self.concurrency - len(self._running))

    def _handled(self, running: Running) -> None:
        running.finishing = True
        self._wake.set()

    async def _pause(self, seconds: float) -> None:
        """Sleep until woken (new jobs, a free slot, stop) or ``seconds`` pass."""
        try:
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)
        except TimeoutError:
            pass

