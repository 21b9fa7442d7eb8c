"""How a worker stops: asked (SIGTERM, SIGINT, ``stop()``), it claims no
more, gives its runs the grace, gives back what is left while its leases
may still be its own, lets the last writes land, and ends within its grace
and one lease TTL whatever the database does."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from typing import Any

from redrive import signals
from redrive.core.transitions import Finished, Requeue
from redrive.errors import StoreError
from redrive.runtime.completer import STORE_RETRY_PAUSE_S
from redrive.runtime.control import Control

log = logging.getLogger("redrive.worker")


class Stopping(Control):
    async def run(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """Stop claiming and shut down gracefully; safe from any thread or signal handler."""
        if self._loop is None:
            self._stopping.set()
        else:
            self._loop.call_soon_threadsafe(self._begin_stop)

    def _begin_stop(self) -> None:
        if not self._stopping.is_set():
            log.info("worker %s stopping: no more claims", self.id)
            self._stop_began = time.monotonic()
        self._stopping.set()
        self._wake.set()

    def run_until_stopped(self) -> None:
        """Run in this thread until SIGTERM or SIGINT, then shut down gracefully."""

        def asked_to_stop(signum: int, frame: Any) -> None:
            # A plain signal handler runs between the main thread's bytecodes,
            # so it is heard even while an async task holds the event loop.
            self.stop()
            if self._watchdog is not None:
                self._watchdog.stop_asked()

        async def main() -> None:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, asked_to_stop)
            if signals.stop_asked():  # a SIGTERM while the process was starting
                self.stop()
            await self.run()

        asyncio.run(main())

    def _shutdown_left(self) -> float | None:
        """Seconds left for a stopping worker's last store calls. Asked to
        stop, a worker ends within its grace and one lease TTL, whatever the
        database does: the drain takes at most the grace and half the TTL,
        what follows a quarter, and the last quarter is the process's to end."""
        if self._stop_began is None:
            return None
        ends = self._stop_began + self.shutdown_grace.total_seconds() + self.lease_ttl.total_seconds() * 0.75
        return ends - time.monotonic()

    def _service_ended(self, service: asyncio.Task) -> None:
        # Without its heartbeat or completer a worker would hold leases it
        # cannot honour: stop cleanly and let the jobs go to other workers.
        if not service.cancelled() and service.exception() is not None:
            log.critical("worker %s: %s crashed, stopping", self.id, service.get_name(),
                         exc_info=service.exception())
            self._begin_stop()

    async def _drain(self) -> None:
        """After the grace, at most half a lease TTL more to give the rest back
        and let the last writes land, whatever the database does: a worker
        asked to stop during a partition stops."""
        in_flight = [r.future for r in self._running.values() if r.future is not None]
        if in_flight:
            log.info("waiting up to %ss for %d in-flight jobs",
                     self.shutdown_grace.total_seconds(), len(in_flight))
            await asyncio.wait(in_flight, timeout=self.shutdown_grace.total_seconds())
        until = time.monotonic() + self.lease_ttl.total_seconds() / 2
        unfinished = [r for r in self._running.values() if not r.finishing]
        if unfinished:
            for r in unfinished:
                r.abandoned = True
                r.interrupt.shutdown()  # a sync handler polling redrive.cancelled() may stop
            requeued = await self._requeue([Requeue(r.lease) for r in unfinished if not r.lost], until=until)
            log.info("requeued %d unfinished jobs: %s", len(requeued),
                     ", ".join(str(done.lease.job_id) for done in requeued))
            for r in unfinished:
                if r.future is not None:
                    r.future.cancel()
        # Jobs already finishing are writing their outcome: let the writes land
        # while there is time (after their leases the writes would be refused anyway).
        if self._running:
            self._idle.clear()
            try:
                await asyncio.wait_for(self._idle.wait(), timeout=max(0.0, until - time.monotonic()))
            except TimeoutError:
                log.warning("%d outcomes were not written before the worker had to stop: their jobs "
                            "return to the queue when their leases expire", len(self._running))

    async def _requeue(self, items: list[Requeue], *, until: float | None = None) -> list[Finished]:
        """Give jobs back; retried while the leases may still be ours (and,
        on shutdown, ``until`` then). Past that the reclaim takes them."""
        leases = {item.lease for item in items}
        while True:
            try:
                return await self._call(self.store.jobs_finish, items)
            except StoreError as exc:
                runs = [r for r in self._running.values() if r.lease in leases]
                expires = min((r.extended_at for r in runs), default=0.0) + self.lease_ttl.total_seconds()
                if time.monotonic() + STORE_RETRY_PAUSE_S >= min(expires, until or expires):
                    # the error as text: an outage's repeats are muted (OutageLog), this line is not
                    log.warning("could not give back %d jobs (%s): they return to the queue when their "
                                "leases expire", len(items), str(exc))
                    return []
                log.warning("giving back %d jobs failed, retrying: %s", len(items), exc)
                await asyncio.sleep(STORE_RETRY_PAUSE_S)

