"""The services every worker runs beside its claim loop: the reclaimer gives
expired leases back to the queue, the pruner deletes old history. Both are
safe to run in every worker at once (the store skips rows another worker
holds) and jittered so many workers do not act in lockstep."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta
from random import Random

from redrive.core.states import Status
from redrive.errors import StoreError
from redrive.events import EventStream
from redrive.runtime.completer import announce
from redrive.runtime.offload import Offload
from redrive.store.port import Store

log = logging.getLogger("redrive.worker")

PRUNE_BATCH = 1000
PRUNE_EVERY_S = 60.0


class Reclaimer:
    """Every half lease TTL (jittered): expired leases back to queued, or
    failed when no attempt is left, each announced as any ending is (a job
    failed here is a ``job.failed`` and a ``job.dead_lettered``, counted,
    logged and notified); ``found`` is told when any came back."""

    def __init__(self, store: Store, call: Offload, *, lease_ttl: timedelta, rng: Random,
                 events: EventStream, found: Callable[[], None]) -> None:
        self._store, self._call, self._ttl, self._rng = store, call, lease_ttl, rng
        self._events, self._found = events, found

    async def run(self) -> None:
        while True:
            try:
                reclaimed = await self._call(self._store.jobs_reclaim)
            except StoreError as exc:
                log.warning("reclaim failed, retrying: %s", exc)
            else:
                if reclaimed:
                    failed = sum(1 for done in reclaimed if done.status is Status.FAILED)
                    log.info("reclaimed %d jobs whose lease expired (%d failed: no attempt left)",
                             len(reclaimed), failed)
                    for done in reclaimed:
                        announce(self._events, done)
                    self._found()
            await asyncio.sleep(self._ttl.total_seconds() / 2 * self._rng.uniform(0.5, 1.0))


class Pruner:
    """History older than the retention goes in small batches, so a big first
    prune never holds the store for long."""

    def __init__(self, store: Store, call: Offload, *, retention: timedelta, rng: Random) -> None:
        self._store, self._call, self._retention, self._rng = store, call, retention, rng

    async def run(self) -> None:
        while True:
            try:
                pruned = await self._call(self._store.jobs_prune, older_than=self._retention, limit=PRUNE_BATCH)
            except StoreError as exc:
                log.warning("pruning history failed, retrying: %s", exc)
                pruned = 0
            if pruned:
                log.info("pruned %d finished jobs older than %s", pruned, self._retention)
            if pruned < PRUNE_BATCH:
                await asyncio.sleep(PRUNE_EVERY_S * self._rng.uniform(0.5, 1.0))
