"""A worker's event loop must never be blocked: its claims, outcome writes and
shutdown all run there. An async task that computes or calls something
blocking (``time.sleep``, ``requests.get``) holds it. The watchdog, on a
thread of its own, notices (the loop stops answering its pings), says which
task holds it, and when the worker was asked to stop and the loop stays
blocked past the shutdown grace, gives the held jobs back and ends the
process: a worker that cannot stop must not keep jobs from others.

Heartbeats do not depend on the loop (``runtime/worker.py`` renews leases
from a thread), so a blocked loop does not lose them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable

log = logging.getLogger("redrive.worker")

PING_S = 0.5
BLOCKED_S = 2.0  # a loop silent this long is blocked
EXIT_BLOCKED = 70  # EX_SOFTWARE: the process ended itself, a task would not yield


class Watchdog:
    def __init__(self, loop: asyncio.AbstractEventLoop, *, loop_thread: int, grace_s: float,
                 give_back: Callable[[], int]) -> None:
        """``give_back()`` requeues every job the worker holds (from this
        thread, straight to the store) and says how many."""
        self._loop = loop
        self._loop_thread = loop_thread
        self._grace_s = grace_s
        self._give_back = give_back
        self._answered = time.monotonic()
        self._stop_asked: float | None = None
        self._done = threading.Event()
        self._told = False
        self._thread = threading.Thread(target=self._watch, name="redrive-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._done.set()

    def stop_asked(self) -> None:
        """From a signal handler: the worker should stop, even if the loop cannot hear it."""
        if self._stop_asked is None:
            self._stop_asked = time.monotonic()

    def _pong(self) -> None:
        self._answered = time.monotonic()
        if self._told:
            log.warning("the event loop answers again")
            self._told = False

    def _watch(self) -> None:
        while not self._done.wait(PING_S):
            try:
                self._loop.call_soon_threadsafe(self._pong)
            except RuntimeError:  # the loop is closed: the worker is gone
                return
            silent = time.monotonic() - self._answered
            if silent >= BLOCKED_S and not self._told:
                self._told = True
                log.error("the event loop has been blocked for %.1f s by %s. An async task must not compute "
                          "or make blocking calls: make it a sync task, or use asyncio.to_thread", silent,
                          self._culprit())
            if self._stop_asked is not None and silent >= BLOCKED_S \
                    and time.monotonic() - self._stop_asked >= self._grace_s:
                given = self._give_back()
                log.critical("asked to stop, but the event loop stayed blocked past the %.0f s grace: gave back "
                             "%d jobs and ended the process", self._grace_s, given)
                logging.shutdown()
                os._exit(EXIT_BLOCKED)

    def _culprit(self) -> str:
        """Where the loop's thread is now: the task's own frame, if one is there."""
        frame = sys._current_frames().get(self._loop_thread)
        if frame is None:
            return "an unknown task"
        stack = traceback.extract_stack(frame)
        mine = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        outside = [f for f in stack if not f.filename.startswith(mine) and "asyncio" not in f.filename]
        where = (outside or stack)[-1]
        return f"{where.name} ({os.path.basename(where.filename)}:{where.lineno})"
