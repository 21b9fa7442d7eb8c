"""A worker you can see: it registers itself in the store when it starts,
renews its heartbeat with how many jobs it runs every few seconds, and
leaves the registry when it stops cleanly. One that is killed stays listed,
marked stale once it misses three heartbeats (``views.worker_view``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from datetime import timedelta
from typing import Any

from redrive.errors import StoreError
from redrive.store.port import WORKER_REPORT_INTERVAL_S, Store, WorkerReport

log = logging.getLogger("redrive.worker")


def memory_bytes() -> int:
    """This process's resident memory now (Linux), or its peak where
    /proc is not there."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024  # bytes there, KiB elsewhere


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def installed_version() -> str:
    # Imported here: loading importlib.metadata (and what it loads) was a
    # tenth of every ``import redrive``; only workers and --version ask.
    from importlib import metadata

    try:
        return metadata.version("redrive")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


class Presence:
    def __init__(self, store: Callable[[], Store], call: Callable[..., Awaitable[Any]],
                 report: Callable[[], WorkerReport]) -> None:
        self._store, self._call, self._report = store, call, report
        self._soon = asyncio.Event()
        # The report under way: a store call goes on when the task awaiting it
        # is cancelled, so leaving waits for it (else it could land after the
        # removal and list the worker again, for ever stale); none starts after.
        self._reporting: asyncio.Future[Any] | None = None
        self._left = False

    def soon(self) -> None:
        """Report now rather than at the next heartbeat (on the worker's loop)."""
        self._soon.set()

    async def run(self) -> None:
        while True:
            self._soon.clear()
            await self.report()
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a
            # cancel that comes as the event is set (an orphaned thread told at
            # shutdown did just that), and the stopping worker waited on this task.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(WORKER_REPORT_INTERVAL_S):
                    await self._soon.wait()

    async def report(self) -> None:
        if self._left:
            return
        self._reporting = reporting = asyncio.ensure_future(self._call(self._store().worker_report,
                                                                       report=self._report()))
        reporting.add_done_callback(_seen)
        try:
            await asyncio.shield(reporting)
        except StoreError as exc:
            log.warning("reporting this worker to the registry failed, retrying: %s", exc)

    async def leave(self, within: float | None = None) -> None:
        """Leave the registry, taking ``within`` seconds at most: a stopping
        worker's last call must not outlast its time to stop (the entry then
        goes stale, as a killed worker's does)."""
        self._left = True
        started = time.monotonic()
        if self._reporting is not None and not self._reporting.done():
            await asyncio.wait([self._reporting], timeout=within)
        if within is not None:
            within -= time.monotonic() - started
        if within is not None and within <= 0:
            log.warning("not leaving the worker registry: no time left to stop in (the entry goes stale)")
            return
        store = self._store()
        worker_id = self._report().id
        # A PostgreSQL call has a deadline, shortened for this call alone (other
        # threads' calls on the same store keep theirs); SQLite's calls are local.
        calls_within = getattr(store, "calls_within", None)

        def remove() -> None:
            bounded = (calls_within(timedelta(seconds=within)) if calls_within is not None and within is not None
                       else nullcontext())
            with bounded:
                store.worker_remove(worker_id=worker_id)

        try:
            await self._call(remove)
        except StoreError as exc:
            log.warning("leaving the worker registry failed (the entry goes stale): %s", exc)


def _seen(done: asyncio.Future[Any]) -> None:
    """A report's error is logged by the task that awaited it, if it still
    did; read here too, so a report left to finish alone is no "exception
    never retrieved"."""
    if not done.cancelled():
        done.exception()
