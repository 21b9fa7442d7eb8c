"""A supervisor of worker processes: ``redrive worker APP --processes N``.

Each child is an ordinary single-process worker (``redrive worker APP`` with
the same flags) under a worker id the supervisor gives it, so the supervisor
knows whose leases are whose without asking the child. When a child dies
(SIGKILL, the OOM killer, a crash in a C extension), its leases are taken
back at once through the store's normal transition (``jobs_reclaim`` with
its worker id: back to the queue, or failed ``WORKER_CRASHED`` on the last
attempt) and announced like any other ending, instead of waiting a lease
TTL; then it is replaced, with a backoff when it keeps dying at start-up.
The store still fences: a child that was only frozen cannot write late.

SIGTERM or SIGINT to the supervisor goes to every child, which drains as a
single worker does; the supervisor exits once they have, and kills any
child still there after its grace and one lease TTL (taking its leases back).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from redrive.errors import StoreError
from redrive.events import EventStream
from redrive.runtime.completer import announce
from redrive.store.port import Store

log = logging.getLogger("redrive.supervisor")

POLL_S = 0.05  # how often the supervisor looks at its children
STEADY_S = 10.0  # a child that lived this long did not die "at start-up"
BACKOFF_S = (0.5, 30.0)  # first and longest wait before replacing a child that died at start-up
GIVE_UP_AFTER = 5  # deaths at start-up in a row before the supervisor stops


@dataclass
class Child:
    worker_id: str
    process: subprocess.Popen[bytes]
    started: float = field(default_factory=time.monotonic)
    told: bool = False  # sent SIGTERM


class Supervisor:
    def __init__(self, command: Callable[[str], Sequence[str]], *, processes: int, store: Callable[[], Store],
                 events: EventStream, stop_within: timedelta) -> None:
        """``command(worker_id)`` is one child's argv; ``stop_within`` how long
        a child may take to stop once told (its grace and one lease TTL)."""
        self._command = command
        self._processes = processes
        self._store = store
        self._events = events
        self._stop_within = stop_within.total_seconds()
        self._prefix = f"{socket.gethostname()}:{os.getpid()}"
        self._children: list[Child] = []
        self._stopping: float | None = None  # when the stop was asked (monotonic)
        self._deaths_at_start = 0
        self._replace_at: list[float] = []  # when to start the children that died

    def run(self) -> int:
        """Run until SIGTERM or SIGINT and every child has stopped: 0, or 1
        when children kept dying at start-up."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._asked_to_stop)
        for _ in range(self._processes):
            self._spawn()
        log.info("supervisor %s started %d worker processes: %s", self._prefix, self._processes,
                 ", ".join(str(c.process.pid) for c in self._children))
        code = 0
        while self._children or (self._stopping is None and self._replace_at):
            time.sleep(POLL_S)
            for child in [c for c in self._children if c.process.poll() is not None]:
                self._children.remove(child)
                if not self._ended(child):
                    code = 1
                    self._asked_to_stop(signal.SIGTERM, None)
            now = time.monotonic()
            if self._stopping is not None:
                self._tell()  # a child started as the stop came was not in the list the handler told
            if self._stopping is None:
                for at in [at for at in self._replace_at if at <= now]:
                    self._replace_at.remove(at)
                    self._spawn()
            elif now - self._stopping > self._stop_within:
                for child in self._children:
                    log.warning("worker process %d did not stop within %gs: killing it", child.process.pid,
                                self._stop_within)
                    child.process.kill()
        log.info("supervisor %s stopped", self._prefix)
        return code

    def _spawn(self) -> None:
        worker_id = f"{self._prefix}.{uuid.uuid4().hex[:6]}"
        process = subprocess.Popen(list(self._command(worker_id)))
        self._children.append(Child(worker_id, process))

    def _asked_to_stop(self, signum: int, frame: Any) -> None:
        if self._stopping is None:
            log.info("supervisor %s stopping: telling %d worker processes", self._prefix, len(self._children))
            self._stopping = time.monotonic()
        self._tell()

    def _tell(self) -> None:
        for child in self._children:
            if not child.told and child.process.poll() is None:
                child.told = True
                child.process.send_signal(signal.SIGTERM)

    def _ended(self, child: Child) -> bool:
        """A child exited: take its leases back and, unless stopping, replace
        it. False when children keep dying at start-up (time to give up)."""
        code = child.process.returncode
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
        taken = self._take_back(child)
        if code == 0 and self._stopping is None:  # it ran its jobs (--max-jobs-per-child): recycled
            log.info("worker process %d (%s) recycled after %.1fs", child.process.pid, child.worker_id,
                     time.monotonic() - child.started)
            self._replace_at.append(time.monotonic())
            return True
        if self._stopping is not None and code == 0:
            return True
        lived = time.monotonic() - child.started
        log.warning("worker process %d (%s) ended (%s) after %.1fs; %d jobs it held were taken back",
                    child.process.pid, child.worker_id, how, lived, taken)
        if self._stopping is not None:
            return True
        self._deaths_at_start = self._deaths_at_start + 1 if lived < STEADY_S else 0
        if self._deaths_at_start >= GIVE_UP_AFTER:
            log.error("worker processes keep dying at start-up (%d in a row, the last: %s): stopping; "
                      "run one with `redrive worker` to see why", self._deaths_at_start, how)
            return False
        delay = 0.0 if not self._deaths_at_start else \
            min(BACKOFF_S[1], BACKOFF_S[0] * 2 ** (self._deaths_at_start - 1))
        self._replace_at.append(time.monotonic() + delay)
        return True

    def _take_back(self, child: Child) -> int:
        """Its leases, ended now through the store (fenced), each announced."""
        try:
            done = self._store().jobs_reclaim(worker_id=child.worker_id)
            self._store().worker_remove(worker_id=child.worker_id)  # gone, not stale: it will not be back
        except StoreError as exc:  # its leases expire in a TTL; another worker's reclaim takes them
            log.warning("could not take back the jobs of worker process %d: %s", child.process.pid, str(exc))
            return 0
        for finished in done:
            announce(self._events, finished)
        return len(done)
