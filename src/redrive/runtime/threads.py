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
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger("redrive.worker")


class DaemonThreadPool:
    def __init__(self, size: int, *, name: str = "redrive-task",
                 on_orphans: Callable[[int], None] | None = None) -> None:
        """``on_orphans(count)`` is told each time the number of orphaned
        threads changes, on whichever thread changed it."""
        self._size = size
        self._name = name
        self._work: queue.SimpleQueue[tuple[Future, Callable[[], Any]]] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        # Threads still running a call nobody waits for any more (a sync
        # handler past its time limit), each with its call's key: each leaves
        # the pool when its call returns, and a new thread takes its place at once.
        self._orphans: dict[threading.Thread, Hashable] = {}
        self._when_done: dict[Hashable, Callable[[], None]] = {}  # by key: what to do when its orphan returns
        self._on_orphans = on_orphans
        self._spawned = 0
        self._lock = threading.Lock()

    @property
    def orphaned(self) -> int:
        """Threads still running a call nobody waits for any more."""
        return len(self._orphans)

    async def run(self, fn: Callable[[], T], *, what: str = "a call", key: Hashable = None) -> T:
        """``what`` names the call in the one line logged if it is orphaned;
        ``key`` names it for ``when_done``."""
        future: Future[T] = Future()
        future.redrive_key = key  # type: ignore[attr-defined]
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

    def when_done(self, key: Hashable, fn: Callable[[], None]) -> None:
        """Call ``fn`` once no thread runs the call ``key`` any more: now, or
        when its orphaned thread returns at last (on that thread)."""
        with self._lock:
            if key is not None and key in self._orphans.values():
                self._when_done[key] = fn
                return
        fn()

    def _orphan(self, future: Future[Any], what: str) -> None:
        thread = getattr(future, "redrive_thread", None)
        if thread is None or future.done():
            return
        with self._lock:
            self._orphans[thread] = getattr(future, "redrive_key", None)
            count = len(self._orphans)
        log.warning("%s runs on, abandoned, on thread %s, which nothing can stop: %d orphaned threads in this "
                    "worker", what, thread.name, count)
        self._ensure_threads()
        if self._on_orphans is not None:
            self._on_orphans(count)

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
                if me not in self._orphans:
                    continue
                key = self._orphans.pop(me)
                self._threads.remove(me)
                done = self._when_done.pop(key, None)
                count = len(self._orphans)
            log.info("orphaned thread %s returned at last: %d orphaned threads left", me.name, count)
            if done is not None:
                done()
            if self._on_orphans is not None:
                self._on_orphans(count)
            return
