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

A run with a hard time limit (``hard_timeout=``) is announced by its child
over a pipe (``runtime/link.py``) as it starts and ends; past its limit the
supervisor kills the child, whatever it is doing, ends that attempt
``TIMEOUT`` (retried by the task's policy), and hands the child's other jobs
back with their attempts refunded: they did nothing wrong.

SIGTERM or SIGINT to the supervisor goes to every child, which drains as a
single worker does; the supervisor exits once they have, and kills any
child still there after its grace and one lease TTL (taking its leases back).

The supervisor's own store calls (its registry entry, taking a dead child's
leases back) run on a thread of their own: a store that is slow or hung
(up to its deadline) never holds up a hard-limit kill, a stop or a
replacement.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from random import Random
from typing import Any
from uuid import UUID

from redrive.core.job import JSON
from redrive.core.states import Status
from redrive.core.transitions import Finished, finish_of, overran
from redrive.declarations import Registry
from redrive.errors import StoreError
from redrive.runtime.completer import announce
from redrive.runtime.executor import stages_of
from redrive.runtime.link import ENV, Inbox
from redrive.runtime.presence import installed_version, memory_bytes
from redrive.store.port import WORKER_REPORT_INTERVAL_S, Store, WorkerReport
from redrive.stream import EventStream

log = logging.getLogger("redrive.supervisor")

POLL_S = 0.05  # how often the supervisor looks at its children
STEADY_S = 10.0  # a child that lived this long did not die "at start-up"
BACKOFF_S = (0.5, 30.0)  # first and longest wait before replacing a child that died at start-up
GIVE_UP_AFTER = 5  # deaths at start-up in a row before the supervisor stops


@dataclass(frozen=True)
class HardLimited:
    """A run its child said started, with a hard time limit."""

    job_id: str
    lease: str
    task: str
    seconds: float
    deadline: float  # monotonic


@dataclass
class Child:
    worker_id: str
    process: subprocess.Popen[bytes]
    inbox: Inbox
    started: float = field(default_factory=time.monotonic)
    told: bool = False  # sent SIGTERM
    runs: dict[str, HardLimited] = field(default_factory=dict)  # by lease token
    overran: HardLimited | None = None  # the run it was killed for
    leaving: str | None = None  # why it said it leaves (recycled)
    counts: dict[str, Any] | None = None  # its metrics' counts, as last reported and not yet passed on

    def hear(self) -> None:
        for message in self.inbox.read():
            if "run" in message:
                try:
                    seconds = float(message["hard_s"])
                    run = HardLimited(str(message["run"]), str(message["lease"]), str(message["task"]), seconds,
                                      time.monotonic() + seconds)
                except (KeyError, TypeError, ValueError):
                    continue
                self.runs[run.lease] = run
            elif "ended" in message:
                self.runs.pop(str(message["ended"]), None)
            elif "leaving" in message:
                self.leaving = str(message["leaving"])
            elif isinstance(message.get("counts"), dict):
                self.counts = message["counts"]


class Supervisor:
    def __init__(self, command: Callable[[str], Sequence[str]], *, processes: int, store: Callable[[], Store],
                 events: EventStream, registry: Registry, stop_within: timedelta,
                 queues: Sequence[str] = ("default",),
                 counted: Callable[[str, dict[str, Any] | None], None] | None = None) -> None:
        """``command(worker_id)`` is one child's argv; ``stop_within`` how long
        a child may take to stop once told (its grace and one lease TTL)."""
        self._command = command
        self._processes = processes
        self._store = store
        self._events = events
        self._registry = registry
        self._rng = Random()
        self._stop_within = stop_within.total_seconds()
        self._prefix = f"{socket.gethostname()}:{os.getpid()}"
        self._children: list[Child] = []
        self._stopping: float | None = None  # when the stop was asked (monotonic)
        self._deaths_at_start = 0
        self._replace_at: list[float] = []  # when to start the children that died
        self._queues = list(queues)
        self._counted = counted  # a child's metrics' counts (None: it is gone), for --metrics-port
        self._restarts: Counter[str] = Counter()  # by reason (REPLACED_BECAUSE)
        self._replaced: deque[dict[str, JSON]] = deque(maxlen=10)  # for redrive workers: whom, why, when
        self._reported = 0.0  # when it last reported itself to the registry (monotonic)
        # Every store call, in order, off the loop that watches the children
        self._calls = ThreadPoolExecutor(max_workers=1, thread_name_prefix="redrive-supervisor-store")
        self._reporting: Future[None] | None = None

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
            if time.monotonic() - self._reported >= WORKER_REPORT_INTERVAL_S:
                self._report()
            for child in self._children:
                self._hear(child)
                self._keep_hard_limits(child)
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
                    self._reported = 0.0
            elif now - self._stopping > self._stop_within:
                for child in self._children:
                    log.warning("worker process %d did not stop within %gs: killing it", child.process.pid,
                                self._stop_within)
                    child.process.kill()
        self._calls.shutdown(wait=True)  # the last children's leases taken back before it leaves
        try:
            self._store().worker_remove(worker_id=self._prefix)
        except StoreError as exc:
            log.warning("leaving the worker registry failed (the entry goes stale): %s", str(exc))
        log.info("supervisor %s stopped", self._prefix)
        return code

    def _report(self) -> None:
        """Its own entry in the registry: its children, restarts and replacements."""
        self._reported = time.monotonic()
        if self._reporting is not None and not self._reporting.done():
            return  # the last report is still under way (a slow store): no queue of them
        report = WorkerReport(self._prefix, socket.gethostname(), os.getpid(), self._queues, 0,
                              installed_version(), running=0, memory_bytes=memory_bytes(),
                              children=len(self._children), restarts=self._restarts.total(),
                              replaced=list(self._replaced), restarts_by=dict(self._restarts))
        self._reporting = self._calls.submit(self._send, report)

    def _send(self, report: WorkerReport) -> None:
        try:
            self._store().worker_report(report=report)
        except StoreError as exc:
            log.warning("reporting the supervisor to the registry failed, retrying: %s", str(exc))

    def _replace(self, child: Child, reason: str, why: str, delay: float = 0.0) -> None:
        """``reason``: one of REPLACED_BECAUSE; ``why``: the line an operator reads."""
        self._replaced.append({"pid": child.process.pid, "worker": child.worker_id, "why": why, "reason": reason,
                               "at": datetime.now(UTC).isoformat(timespec="seconds")})
        self._restarts[reason] += 1
        self._replace_at.append(time.monotonic() + delay)
        self._reported = 0.0  # say so at the next look

    def _spawn(self) -> None:
        worker_id = f"{self._prefix}.{uuid.uuid4().hex[:6]}"
        read, write = os.pipe()
        try:
            process = subprocess.Popen(list(self._command(worker_id)), pass_fds=(write,),
                                       env={**os.environ, ENV: f"{write} {self._prefix}"})
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)  # the child's now: a read sees the end once the child is gone
        self._children.append(Child(worker_id, process, Inbox(read)))

    def _hear(self, child: Child) -> None:
        child.hear()
        if child.counts is not None and self._counted is not None:
            self._counted(child.worker_id, child.counts)
        child.counts = None

    def _keep_hard_limits(self, child: Child) -> None:
        """Kill a child whose run is past its hard limit: nothing short of
        that stops a thread (or a C extension holding the GIL)."""
        if child.overran is not None or child.process.poll() is not None:
            return
        now = time.monotonic()
        for run in child.runs.values():
            if now >= run.deadline:
                log.warning("job %s (%s) ran past its hard time limit of %gs: killing worker process %d",
                            run.job_id, run.task, run.seconds, child.process.pid)
                child.overran = run
                child.process.kill()
                return

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
        self._hear(child)  # what it said last: a run that ended just before it did, its last counts
        child.inbox.close()
        if self._counted is not None:
            self._counted(child.worker_id, None)
        code = child.process.returncode
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
        self._calls.submit(self._take_back, child)
        if child.overran is not None:  # killed for its overrun: replaced at once, not a death at start-up
            log.info("worker process %d (%s) replaced after job %s overran", child.process.pid, child.worker_id,
                     child.overran.job_id)
            if self._stopping is None:
                self._replace(child, "hard_time_limit", f"killed: job {child.overran.job_id} ({child.overran.task}) "
                                                        f"ran past its hard time limit of {child.overran.seconds:g}s")
            return True
        if code == 0 and self._stopping is None:  # it ran its jobs (--max-jobs-per-child): recycled
            log.info("worker process %d (%s) recycled after %.1fs (%s)", child.process.pid, child.worker_id,
                     time.monotonic() - child.started, child.leaving or "it left")
            self._replace(child, "recycled", f"recycled: it {child.leaving}" if child.leaving else "recycled")
            return True
        if self._stopping is not None and code == 0:
            return True
        lived = time.monotonic() - child.started
        log.warning("worker process %d (%s) ended (%s) after %.1fs; the jobs it held are taken back",
                    child.process.pid, child.worker_id, how, lived)
        if self._stopping is not None:
            return True
        self._deaths_at_start = self._deaths_at_start + 1 if lived < STEADY_S else 0
        if self._deaths_at_start >= GIVE_UP_AFTER:
            log.error("worker processes keep dying at start-up (%d in a row, the last: %s): stopping; "
                      "run one with `redrive worker` to see why", self._deaths_at_start, how)
            return False
        delay = 0.0 if not self._deaths_at_start else \
            min(BACKOFF_S[1], BACKOFF_S[0] * 2 ** (self._deaths_at_start - 1))
        self._replace(child, "died", f"died ({how}) after {lived:.1f}s; the jobs it held taken back", delay)
        return True

    def _take_back(self, child: Child) -> None:
        """Its leases, ended now through the store (fenced), each announced:
        the overrun run's as ``TIMEOUT``, the others it held then handed
        back refunded; a dead child's all as crashed. On the store thread."""
        overran = child.overran
        try:
            store = self._store()
            killed = self._end_overrun(store, overran) if overran is not None else []
            # Killed for a run past its hard limit (still running, or abandoned at
            # its soft one and running on in a thread): the others did nothing wrong.
            done = store.jobs_reclaim(worker_id=child.worker_id, bystanders=overran is not None)
            store.worker_remove(worker_id=child.worker_id)  # gone, not stale: it will not be back
        except StoreError as exc:  # its leases expire in a TTL; another worker's reclaim takes them
            log.warning("could not take back the jobs of worker process %d: %s", child.process.pid, str(exc))
            return
        for finished in (*killed, *done):
            announce(self._events, finished)
        if killed or done:
            log.info("worker process %d (%s): %d of its jobs taken back%s", child.process.pid, child.worker_id,
                     len(killed) + len(done),
                     f" (job {killed[0].lease.job_id} failed TIMEOUT, the others went back to the queue)" if killed else
                     " (back to the queue, their attempts refunded)" if overran is not None else "")

    def _end_overrun(self, store: Store, run: HardLimited) -> list[Finished]:
        """The attempt that overran fails ``TIMEOUT`` (by the task's retry
        policy), written with the dead child's lease. Nothing when the run
        had ended after all: then the child's other jobs are taken back as
        a crash's would be."""
        job = store.job_get(job_id=UUID(run.job_id))
        if job is None or job.status is not Status.RUNNING or str(job.lease_token) != run.lease:
            return []
        task = self._registry.tasks.get(job.task)
        if task is None:
            return []
        execution = overran(job, seconds=run.seconds, stages=stages_of(task, job), rng=self._rng)
        return store.jobs_finish([finish_of(job.lease, execution, round(run.seconds * 1000))])
