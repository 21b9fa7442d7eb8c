"""How a worker stops a running handler: a cancel someone asked for, a time
limit passed, or shutdown.

An async handler is interrupted where it awaits (its task is cancelled and
the executor turns that into the run's outcome). A sync handler runs on a
thread nothing can stop: it is told, through ``redrive.cancelled()``, and if
it goes on past its time limit it is abandoned: the worker writes the
outcome, gives back the slot, and the thread runs on, orphaned, its writes
fenced out with the lease and whatever it returns dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

SHUTDOWN = "shutdown"  # why a run is told to stop when its worker requeued it


@dataclass(frozen=True, slots=True)
class Limit:
    deadline: float  # on the event loop's clock
    seconds: float
    what: str  # "task send_email" or "stage render"


class Interrupt:
    """One run's stop signals. Lives on the worker's event loop; a sync
    handler's thread only reads it (``stopping``) and arms stage limits
    through ``limit``, which hops onto the loop."""

    __slots__ = ("_limits", "_loop", "_timer", "cancel_by", "in_handler", "run", "stopped_for", "timed_out")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.run: asyncio.Future[None] | None = None  # the worker's future for this run
        self.in_handler = False  # task code is running (not the worker's own awaits)
        self.cancel_by: str | None = None  # who asked for a cancel
        self.timed_out: Limit | None = None
        self.stopped_for: str | None = None  # SHUTDOWN when the worker gave the job back
        self._limits: list[Limit] = []
        self._timer: asyncio.TimerHandle | None = None

    @property
    def stopping(self) -> bool:
        """What ``redrive.cancelled()`` answers: the run should stop."""
        return self.cancel_by is not None or self.timed_out is not None or self.stopped_for is not None

    @property
    def interrupted(self) -> bool:
        """Whether the run's task was cancelled by us (not by someone else)."""
        return self.cancel_by is not None or self.timed_out is not None

    # -- from the worker -----------------------------------------------------------

    def cancel(self, by: str, *, is_async: bool) -> None:
        """A cancel was asked: an async handler is cancelled now; a sync one
        is told and must stop itself (or be abandoned at its time limit)."""
        if self.cancel_by is not None:
            return
        self.cancel_by = by
        if is_async:
            self._interrupt()

    def shutdown(self) -> None:
        self.stopped_for = SHUTDOWN

    # -- time limits -----------------------------------------------------------------

    def limit(self, seconds: float, what: str) -> Limit:
        """Arm a time limit from now (nested limits: the earliest wins). Safe
        from a handler's thread. Returns what ``unlimit`` takes."""
        limit = Limit(self._loop.time() + seconds, seconds, what)
        self._on_loop(self._push, limit)
        return limit

    def unlimit(self, limit: Limit) -> None:
        self._on_loop(self._pop, limit)

    def clear(self) -> None:
        """The handler is done: no limit may fire any more."""
        self._limits.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_loop(self, fn: Callable[[Limit], None], limit: Limit) -> None:
        try:
            here = asyncio.get_running_loop() is self._loop
        except RuntimeError:  # a sync handler's thread
            here = False
        if here:
            fn(limit)
        else:
            self._loop.call_soon_threadsafe(fn, limit)

    def _push(self, limit: Limit) -> None:
        self._limits.append(limit)
        self._arm()

    def _pop(self, limit: Limit) -> None:
        if limit in self._limits:
            self._limits.remove(limit)
            self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._limits and self.timed_out is None:
            first = min(self._limits, key=lambda limit: limit.deadline)
            self._timer = self._loop.call_at(first.deadline, self._expired, first)

    def _expired(self, limit: Limit) -> None:
        self._timer = None
        if not self.in_handler or self.timed_out is not None:
            return
        self.timed_out = limit
        self._interrupt()

    def _interrupt(self) -> None:
        # Only while task code runs: the worker's own awaits (its breaker
        # check, its outcome write) must not be cut short.
        if self.in_handler and self.run is not None and not self.run.done():
            self.run.cancel()
