"""A pool of daemon threads for sync handlers.

concurrent.futures joins its threads at interpreter exit, so one sync handler
stuck past the shutdown grace would keep the process alive after its job was
requeued. Daemon threads let the worker exit once its last write is done.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class DaemonThreadPool:
    def __init__(self, size: int, *, name: str = "redrive-task") -> None:
        self._size = size
        self._name = name
        self._work: queue.SimpleQueue[tuple[Future, Callable[[], Any]]] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    async def run(self, fn: Callable[[], T]) -> T:
        future: Future[T] = Future()
        self._ensure_threads()
        self._work.put((future, fn))
        return await asyncio.wrap_future(future)

    def _ensure_threads(self) -> None:
        with self._lock:
            while len(self._threads) < self._size:
                thread = threading.Thread(
                    target=self._serve, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def _serve(self) -> None:
        while True:
            future, fn = self._work.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the awaiting coroutine
                future.set_exception(exc)
