"""A pool of daemon threads for sync handlers.

concurrent.futures joins its threads at interpreter exit, so one sync handler
stuck past the shutdown grace would keep the process alive after its job was
requeued. Daemon threads let the worker exit once its last write is done.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger("redrive.worker")


class DaemonThreadPool:
    def __init__(self, size: int, *, name: str = "redrive-task") -> None:
        self._size = size
        self._name = name
        self._work: queue.SimpleQueue[tuple[Future, Callable[[], Any]]] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        # Threads still running a call nobody waits for any more (a sync
        # handler past its time limit): each leaves the pool when its call
        # returns, and a new thread takes its place at once.
        self._orphans: set[threading.Thread] = set()
        self._spawned = 0
        self._lock = threading.Lock()

    @property
    def orphaned(self) -> int:
        """Threads still running a call nobody waits for any more."""
        return len(self._orphans)

    async def run(self, fn: Callable[[], T], *, what: str = "a call") -> T:
        """``what`` names the call in the one line logged if it is orphaned."""
        future: Future[T] = Future()
        self._ensure_threads()
        self._work.put((future, fn))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            # Not started yet: it never will be. Started: its thread cannot be
            # stopped, so it is orphaned and replaced.
            if not future.cancel():
                self._orphan(future, what)
            raise

    def _orphan(self, future: Future[Any], what: str) -> None:
        thread = getattr(future, "redrive_thread", None)
        if thread is None or future.done():
            return
        with self._lock:
            self._orphans.add(thread)
            count = len(self._orphans)
        log.warning("%s runs on, abandoned, on thread %s, which nothing can stop: %d orphaned threads in this "
                    "worker", what, thread.name, count)
        self._ensure_threads()

    def _ensure_threads(self) -> None:
        with self._lock:
            while len(self._threads) - len(self._orphans) < self._size:
                self._spawned += 1
                thread = threading.Thread(target=self._serve, name=f"{self._name}-{self._spawned}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def _serve(self) -> None:
        me = threading.current_thread()
        while True:
            future, fn = self._work.get()
            future.redrive_thread = me  # type: ignore[attr-defined]  # whom to orphan if abandoned
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the awaiting coroutine
                future.set_exception(exc)
            # not kept while this thread waits for its next call: the last
            # call's arguments, and its result or its error and that error's frames
            del future, fn
            with self._lock:
                if me in self._orphans:
                    self._orphans.discard(me)
                    self._threads.remove(me)
                    count = len(self._orphans)
                else:
                    continue
            log.info("orphaned thread %s returned at last: %d orphaned threads left", me.name, count)
            return
