"""What a worker process tells its supervisor, over a pipe the supervisor
opened for it (``REDRIVE_SUPERVISOR_LINK``: the write end's descriptor and
the supervisor's id).

Only what the supervisor cannot learn from the store, and must know even
when the child cannot act: when a run with a hard time limit starts and
ends (so the supervisor can kill a child whose run overruns, even one stuck
in a C extension holding the GIL), and what the child reports of itself
(jobs run, memory, orphaned threads) for ``redrive workers`` and metrics.

One JSON object per line. The writes block: a message dropped could make
the supervisor kill a child for a run that had ended. A line is shorter
than PIPE_BUF, so lines from several threads never interleave.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

from redrive.core.job import Job

log = logging.getLogger("redrive.worker")

ENV = "REDRIVE_SUPERVISOR_LINK"


class Link:
    """The child's end: one a process, opened the first time it is asked for."""

    _current: Link | None = None
    _opened = False
    _opening = threading.Lock()

    def __init__(self, fd: int, supervisor: str) -> None:
        self._fd: int | None = fd
        self.supervisor = supervisor
        self._lock = threading.Lock()

    @classmethod
    def current(cls) -> Link | None:
        """The link this process was started with, if a supervisor started it."""
        with cls._opening:
            if not cls._opened:
                cls._current, cls._opened = cls._from_environment(), True
            return cls._current

    @classmethod
    def _from_environment(cls) -> Link | None:
        value = os.environ.pop(ENV, None)  # not inherited by whatever the tasks start
        if not value:
            return None
        fd, _, supervisor = value.partition(" ")
        try:
            os.fstat(int(fd))
        except (ValueError, OSError):
            log.warning("%s=%r is not an open descriptor: running without a supervisor's link", ENV, value)
            return None
        return cls(int(fd), supervisor)

    def started(self, job: Job, seconds: float) -> None:
        """A run with a hard limit of ``seconds`` starts now."""
        self._send({"run": str(job.id), "lease": str(job.lease.token), "task": job.task, "hard_s": seconds})

    def ended(self, job: Job) -> None:
        self._send({"ended": str(job.lease.token)})

    def counts(self, snapshot: dict[str, Any]) -> None:
        """Its metrics' counts so far (``metrics.Tally.snapshot``)."""
        self._send({"counts": snapshot})

    def leaving(self, why: str) -> None:
        """This process is about to exit 0 to be replaced (recycled), for this reason."""
        self._send({"leaving": why})

    def _send(self, message: dict[str, Any]) -> None:
        line = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self._fd is None:
                return
            try:
                os.write(self._fd, line)
            except OSError:  # the supervisor is gone: nobody to tell
                self._fd = None


class Inbox:
    """The supervisor's end of one child's link: read without blocking."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self._partial = b""

    def read(self) -> Iterator[dict[str, Any]]:
        """The messages that have arrived whole."""
        chunks = [self._partial]
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # nothing more now (BlockingIOError), or the pipe is gone
                break
            if not chunk:
                break
            chunks.append(chunk)
        *lines, self._partial = b"".join(chunks).split(b"\n")
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                yield message

    def close(self) -> None:
        os.close(self.fd)
