"""The plugins that keep the store in shape: the reclaimer gives expired
leases back to the queue and the rollup compactor folds the charts' rollups
(every worker runs both), the pruner deletes old history. Both are safe to run in every worker at once (the writes are
fenced, the store skips rows another worker holds) and jittered so many
workers do not act in lockstep."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from redrive.core.states import Status
from redrive.errors import StoreError
from redrive.runtime.completer import announce
from redrive.runtime.plugins import Beside, Plugin

log = logging.getLogger("redrive.worker")

PRUNE_BATCH = 1000
PRUNE_EVERY_S = 60.0
COMPACT_EVERY_S = 300.0


class Reclaimer(Plugin):
    """Every half lease TTL (jittered): expired leases back to queued, or
    failed when no attempt is left, each announced as any ending is (a job
    failed here is a ``job.failed`` and a ``job.dead_lettered``, counted,
    logged and notified); the claim loop is woken when any came back. Every
    worker runs one."""

    name = "reclaimer"

    async def run(self, beside: Beside) -> None:
        ttl = beside.lease_ttl.total_seconds()
        while True:
            try:
                reclaimed = await beside.call(beside.store.jobs_reclaim)
            except StoreError as exc:
                log.warning("reclaim failed, retrying: %s", exc)
            else:
                if reclaimed:
                    failed = sum(1 for done in reclaimed if done.status is Status.FAILED)
                    log.info("reclaimed %d jobs whose lease expired (%d failed: no attempt left)",
                             len(reclaimed), failed)
                    for done in reclaimed:
                        announce(beside.events, done)
                    beside.wake()
            await asyncio.sleep(ttl / 2 * beside.rng.uniform(0.5, 1.0))


class Pruner(Plugin):
    """History older than ``retention`` goes in small batches, so a big first
    prune never holds the store for long."""

    name = "pruner"

    def __init__(self, retention: timedelta) -> None:
        self.retention = retention

    async def run(self, beside: Beside) -> None:
        while True:
            try:
                pruned = await beside.call(beside.store.jobs_prune, older_than=self.retention, limit=PRUNE_BATCH)
            except StoreError as exc:
                log.warning("pruning history failed, retrying: %s", exc)
                pruned = 0
            if pruned:
                log.info("pruned %d finished jobs older than %s", pruned, self.retention)
            if pruned < PRUNE_BATCH:
                await asyncio.sleep(PRUNE_EVERY_S * beside.rng.uniform(0.5, 1.0))


class RollupCompactor(Plugin):
    """Every five minutes (jittered), the rollups folded as core/rollups.py
    says: shards added together, minutes into hours after a day, gone after
    ``KEEP``. Safe in every worker at once (a row moves once)."""

    name = "rollup-compactor"

    async def run(self, beside: Beside) -> None:
        while True:
            await asyncio.sleep(COMPACT_EVERY_S * beside.rng.uniform(0.5, 1.0))
            try:
                await beside.call(beside.store.rollups_compact)
            except StoreError as exc:
                log.warning("compacting the rollups failed, retrying: %s", exc)
