"""The SQLite database's clock: the time the kernel stamps on a file beside it.

PostgreSQL has one clock for every worker, the server's ``now()``. SQLite runs
inside each process, so ``julianday('now')`` is that process's clock: a
process whose clock runs ahead (a skewed container, ``faketime``) would see
live leases as expired and delayed jobs as due. The one clock every process
sharing the file does share is the one of the machine that holds the file,
and the kernel writes it on every file it changes. So each reading writes a
byte to ``<database>-clock`` and reads back the file's modification time.

A reading costs a ``pwrite`` and an ``fstat`` (a few microseconds), and is
taken inside the transaction's write lock, so readings follow the order of
the transactions that use them.
"""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("redrive.store.sqlite")


class FileClock:
    """Seconds since the epoch, as the kernel stamps ``<path>-clock``."""

    def __init__(self, database_path: str) -> None:
        self.path = f"{database_path}-clock"
        self._lock = threading.Lock()
        self._fd: int | None = None
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            os.pwrite(self._fd, b"\0", 0)
        except OSError as exc:
            self.close()
            # Without the file the process clock is all there is: leases stay
            # fenced by their tokens; only skew between processes goes unseen.
            log.warning("cannot keep the database's clock in %s (%s); using this process's clock",
                        self.path, exc.strerror or exc)

    @property
    def available(self) -> bool:
        return self._fd is not None

    def read(self) -> float | None:
        """The kernel's time now, or None when the file cannot be written."""
        with self._lock:
            if self._fd is None:
                return None
            try:
                os.pwrite(self._fd, b"\0", 0)
                return os.fstat(self._fd).st_mtime_ns / 1e9
            except OSError:
                return None

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
