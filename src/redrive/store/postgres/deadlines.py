"""Client-side deadlines for calls to PostgreSQL.

A partition between machines closes nothing: a call waits on its socket for
the kernel's retransmission limit (about 15 minutes) or, idle, the keepalive
default (2 hours). psycopg has no deadline for a statement in flight, and the
server's ``statement_timeout`` is never heard by a server on the far side of
a partition. So one thread watches every connection lent out: when a call
overruns its deadline, the connection's socket is shut down, the blocked
read returns at once with an error, and the pool discards the connection.
Watching costs a dict insert and delete under a lock per lending; the thread
sleeps until the earliest deadline, and is woken only for a deadline earlier
than the one it sleeps towards: calls with the same timeout, one after
another, never wake it (a wake-up a call cost a context switch, about a
tenth of a single enqueue's time on two cores).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count
from typing import Any

log = logging.getLogger("redrive.store.postgres")


class Overran(Exception):
    """A watched call passed its deadline and its connection was cut."""


class Deadlines:
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._watched: dict[int, tuple[float, Any]] = {}  # token -> (deadline, connection)
        self._cut: set[int] = set()
        self._tokens = count()
        self._thread: threading.Thread | None = None
        self._wakes_at = float("inf")  # when the thread looks next; it finds later deadlines then
        self._seconds = 0.0  # the last call's time to finish: how long the thread sleeps with none watched

    @contextmanager
    def watch(self, conn: Any, seconds: float) -> Iterator[None]:
        """Run the block on ``conn`` with ``seconds`` to finish. Past them the
        connection is cut and the block's error becomes ``Overran``; a block
        that finished in the same instant keeps its result, but its
        connection is closed so the pool does not hand it out again."""
        token = next(self._tokens)
        deadline = time.monotonic() + seconds
        with self._lock:
            self._watched[token] = (deadline, conn)
            self._seconds = seconds
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="redrive-pg-deadlines", daemon=True)
                self._thread.start()
            elif deadline < self._wakes_at:
                self._lock.notify()
        failed = True
        try:
            yield
            failed = False
        except Exception as exc:
            if self._forget(token):
                raise Overran() from exc
            raise
        finally:
            if not failed and self._forget(token):
                conn.close()

    def _forget(self, token: int) -> bool:
        """Stop watching; whether the call was cut."""
        with self._lock:
            self._watched.pop(token, None)
            if token in self._cut:
                self._cut.discard(token)
                return True
            return False

    def _watch(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                due = [(token, conn) for token, (deadline, conn) in self._watched.items() if deadline <= now]
                for token, conn in due:
                    # Under the lock: a call that ends now waits here, so a
                    # connection already given back is never cut.
                    del self._watched[token]
                    self._cut.add(token)
                    _cut(conn)
                # With nothing watched, sleep as long as a call may take, not
                # for good: the call that comes next (often already over by
                # the time this thread runs, on a busy machine) then needs
                # no wake-up, nor does the one after it.
                earliest = min((deadline for deadline, _ in self._watched.values()), default=now + self._seconds)
                self._wakes_at = earliest
                self._lock.wait(max(0.0, earliest - time.monotonic()) + 0.01)


def _cut(conn: Any) -> None:
    """Shut the connection's socket down under libpq's feet: its blocked
    read or write returns with an error at once. The socket stays open (it
    is libpq's to close), so its descriptor cannot be reused meanwhile."""
    try:
        if conn.closed:
            return
        with socket.socket(fileno=os.dup(conn.fileno())) as view:
            view.shutdown(socket.SHUT_RDWR)
    except (OSError, ValueError) as exc:  # closed meanwhile: nothing left to cut
        log.debug("could not cut an overrunning connection: %s", exc)

