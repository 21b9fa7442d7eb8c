"""Hearing other processes' commits: SQLite has no NOTIFY, so a thread
watches the file's data version and wakes idle workers and a result's
waiters when it changes (a hint: workers also poll)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable
from uuid import UUID

from redrive.store.port import ANY_QUEUE
from redrive.store.sqlite.connection import _BUSY_TIMEOUT_S, _WATCH_EVERY_S, Connected, log


class Watching(Connected):
    def wakeups_subscribe(self, on_wake: Callable[[str], None]) -> Callable[[], None]:
        # Jobs enqueued through this store are announced at once. Another
        # process's commits show as a new PRAGMA data_version on a connection
        # of our own, looked at every few milliseconds (a hint, like NOTIFY:
        # workers also poll).
        with self._lock:
            self._listeners.append(on_wake)
            self._ensure_watcher()
        return lambda: self._listeners.remove(on_wake)

    def _ensure_watcher(self) -> None:
        if self._watcher is None or not self._watcher.is_alive():  # none yet, or it stopped on an error
            # The version the watch starts from is read here, before the
            # subscriber's call returns: a commit made after it is seen
            # however late the thread gets to run.
            conn = None
            try:
                conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, check_same_thread=False)
                last = conn.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as exc:
                if conn is not None:
                    conn.close()
                self._unwatched(exc)
                return
            self._watcher = threading.Thread(target=self._watch, args=(conn, last), name="redrive-sqlite-watch",
                                             daemon=True)
            self._watcher.start()
            self._unwatched_told = False  # watching again: a later failure is news

    def _watch(self, conn: sqlite3.Connection, last: int) -> None:
        try:
            while not self._closed.wait(_WATCH_EVERY_S):
                version = conn.execute("PRAGMA data_version").fetchone()[0]
                if version != last:
                    last = version
                    self._wake({ANY_QUEUE})
        except sqlite3.Error as exc:
            self._unwatched(exc)
        finally:
            conn.close()

    def _unwatched(self, exc: sqlite3.Error) -> None:
        # workers still poll: say so (once, not at every subscription that retries) and carry on without
        if not self._unwatched_told:
            self._unwatched_told = True
            log.warning("cannot watch %s for other processes' jobs, polling only: %s", self.path, exc)

    def _wake(self, queues: set[str]) -> None:
        for queue in queues:
            for on_wake in list(self._listeners):
                on_wake(queue)
        if ANY_QUEUE in queues:  # another process committed: any awaited job may have ended
            self._finished(None)

    def finishes_subscribe(self, *, job_id: UUID, on_finish: Callable[[], None]) -> Callable[[], None]:
        # This process's own endings are told after their commit; another
        # process's show through the data_version watch, as wake-ups do.
        with self._lock:
            self._finish_listeners.setdefault(job_id, []).append(on_finish)
            self._ensure_watcher()

        def stop() -> None:
            with self._lock:
                self._finish_listeners[job_id].remove(on_finish)

        return stop

    def _finished(self, job_ids: Iterable[UUID] | None) -> None:
        """Tell waiters that these jobs (None: any) may have ended."""
        if not self._finish_listeners:
            return
        with self._lock:
            wanted = [f for job_id, fs in self._finish_listeners.items()
                      if job_ids is None or job_id in job_ids for f in fs]
        for on_finish in wanted:
            on_finish()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            self._conn.close()
        if self._file_clock is not None:
            self._file_clock.close()
