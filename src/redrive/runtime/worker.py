"""The worker process: claims due jobs, runs them, and keeps its word on every lease.

Lifecycle of a claimed job: claim (fresh lease) -> handler -> Outcome -> one
fenced write through the completer, which batches writes from many jobs into
one statement each. While it runs, the heartbeat extends its lease every third
of the TTL; if the lease is found gone, the job is marked lost and whatever it
produces is dropped. On stop: no more claims, in-flight jobs get the grace
period, the rest are requeued, and only then does ``run`` return.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from random import Random
from typing import Any, ParamSpec, TypeVar

from redrive import signals, tracing
from redrive.client import Client
from redrive.core import checks
from redrive.core.job import Job, Lease
from redrive.core.outcome import Execution
from redrive.core.stages import Stage
from redrive.core.transitions import (
    KINDS,
    Completion,
    FailNow,
    Finish,
    Finished,
    Requeue,
    RetryLater,
    fail_fast,
    finish_of,
)
from redrive.errors import ConfigError, StoreError
from redrive.runtime import eager
from redrive.runtime.breakers import BreakerGate, Refusal
from redrive.runtime.completer import STORE_RETRY_PAUSE_S, Completer, announce
from redrive.runtime.executor import execute, stages_of
from redrive.runtime.interrupts import Interrupt
from redrive.runtime.link import Link
from redrive.runtime.maintenance import Pruner, Reclaimer, RollupCompactor
from redrive.runtime.outage import OutageLog
from redrive.runtime.plugins import Beside, Plugin
from redrive.runtime.presence import Presence, installed_version, memory_bytes
from redrive.runtime.scheduler import Scheduler
from redrive.runtime.threads import DaemonThreadPool
from redrive.runtime.watchdog import Watchdog
from redrive.store.port import Store, WorkerReport

log = logging.getLogger("redrive.worker")

P = ParamSpec("P")
T = TypeVar("T")

_HOLD_DELAY = timedelta(seconds=1)  # a held job is looked at again after this


CONTROL_INTERVAL_S = 0.5  # how often a worker reads pauses and cancel requests
_SHORTEST_DEADLINE = timedelta(seconds=1)  # for a store call, however short the lease


@dataclass(eq=False, slots=True)  # one a job: slots make it and read it faster
class _Running:
    job: Job
    lease: Lease  # the job's, built once: the run is keyed, fenced and released by it
    interrupt: Interrupt
    # When the lease was last known good (monotonic): asked for at claim or
    # at the last heartbeat that extended it. A whole TTL past it, the
    # lease may be another worker's.
    extended_at: float
    future: asyncio.Future | None = None
    finishing: bool = False  # the handler is done; its write is queued or under way
    lost: bool = False  # the lease is gone, or was not extended for a whole TTL
    abandoned: bool = False  # given up (shutdown, lease lost); any outcome is dropped


class Worker:
    def __init__(
        self,
        client: Client,
        *,
        queues: Sequence[str] | Mapping[str, int | None] = ("default",),
        concurrency: int | None = None,
        lease_ttl: timedelta | None = None,
        shutdown_grace: timedelta | None = None,
        poll_interval: timedelta | None = None,
        worker_id: str | None = None,
        rng: Random | None = None,
        schedules: bool = False,
        retention: timedelta | None = None,
        plugins: Sequence[Plugin] = (),
        max_jobs: int | None = None,
        max_memory: int | None = None,
    ) -> None:
        """A worker on ``client``'s store, running the tasks its registry
        declares (``Worker(app.client)``). ``queues`` may give some queues
        their own limit of jobs at once (``{"email": 5, "default": None}``);
        ``concurrency`` is the worker's total (default: the sum of the limits
        when every queue has one, else the ``worker_concurrency`` setting).
        ``plugins`` run beside the claim loop (``runtime/plugins.py``:
        notifications, alert rules, metrics, your own), each started once
        the worker runs and stopped once it has drained. ``schedules=True``
        adds the registry's schedules (a ``Scheduler``); a ``retention``
        (default: the ``job_retention`` setting) adds a ``Pruner`` of
        history older than that. Every worker runs a ``Reclaimer`` and a
        ``RollupCompactor``.
        ``max_jobs`` and ``max_memory`` (bytes) recycle a supervisor's
        child: after claiming that many jobs, or once its resident memory
        passes that, the worker claims no more, lets what it holds finish
        and returns."""
        if max_jobs is not None and max_jobs < 1:
            raise ConfigError(f"max_jobs must be at least 1, not {max_jobs}")
        if max_memory is not None and max_memory < 1:
            raise ConfigError(f"max_memory must be a number of bytes above zero, not {max_memory}")
        if not queues:
            raise ConfigError("a worker needs at least one queue")
        limits = dict(queues) if isinstance(queues, Mapping) else dict.fromkeys(queues)
        for queue, limit in limits.items():
            checks.queue_name(queue)
            if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
                raise ConfigError(f"queue {queue!r}: its limit must be a whole number of at least 1, not {limit!r}")
        if concurrency is None and None not in limits.values():
            concurrency = sum(limit for limit in limits.values() if limit is not None)
        # Plugins' own queues (notifications) run in slots of their own,
        # besides ``concurrency``: a webhook that hangs holds none of the jobs'.
        own = {queue: limit for plugin in plugins for queue, limit in plugin.queues.items() if queue not in limits}
        limits.update(own)
        settings = client.settings.with_(
            worker_concurrency=concurrency, worker_lease_ttl=lease_ttl,
            worker_shutdown_grace=shutdown_grace, worker_poll_interval=poll_interval,
            job_retention=retention,
        )
        self.registry = client.registry
        self.events = client.events
        self._client = client
        self.queues = list(limits)
        self.queue_limits = {q: limit for q, limit in limits.items() if limit is not None}
        # Claimed together: each limited queue alone, the others as one group.
        self._groups: list[tuple[list[str], int | None]] = [([q], n) for q, n in self.queue_limits.items()]
        shared = [q for q in self.queues if q not in self.queue_limits]
        if shared:
            self._groups.append((shared, None))
        self._paused: frozenset[str] = frozenset()
        self._limits = [self.registry.limits.for_queues(queues) for queues, _ in self._groups]
        self.concurrency = settings.worker_concurrency
        self.lease_ttl = settings.worker_lease_ttl
        self.shutdown_grace = settings.worker_shutdown_grace
        self.poll_interval = settings.worker_poll_interval
        self.retention = settings.job_retention
        self.id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._rng = rng or Random()
        # Keyed by lease token, not job id: a job whose lease was taken from a
        # paused run can come back to this same worker while that run still
        # goes on, and each run must be waited for and released on its own.
        # (By the token's number: a UUID hashes in Python, an int in C.)
        self._running: dict[int, _Running] = {}
        self._tracing = False
        # What bounds each of this worker's store calls (``run`` sets it): none until the store is open.
        self._bounded: Callable[[], AbstractContextManager[object]] = nullcontext
        self._own = frozenset(own)
        self._threads = DaemonThreadPool(self.concurrency + sum(own.values()), on_orphans=self._orphans_changed)
        self._db = ThreadPoolExecutor(max_workers=2, thread_name_prefix="redrive-db")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = asyncio.Event()
        self._stop_began: float | None = None  # when a stop was asked for (monotonic), if one was
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()  # nothing running and no outcome left to write
        self._store: Store | None = None  # opened on the database threads when the worker starts
        self._completer = Completer(self._call, lambda: self.store)
        self._gate = BreakerGate(self.registry.dependencies, lambda: self.store, self._call, events=self.events)
        self.plugins: list[Plugin] = [Reclaimer(), RollupCompactor(), *plugins]
        if schedules and self.registry.schedules:
            self.plugins.append(Scheduler(client))
        if self.retention > timedelta(0):
            self.plugins.append(Pruner(self.retention))
        self._watchdog: Watchdog | None = None
        self.max_orphans = settings.worker_max_orphans
        self._capped = False  # as many orphaned threads as allowed: no sync job starts here
        self._any_async = any(task.is_async for task in self.registry.tasks.values())
        self._max_jobs = max_jobs
        self._max_memory = max_memory
        self._claimed = 0  # jobs claimed so far, for max_jobs
        self._ran = 0  # jobs run to an end or handed back
        self._retiring: str | None = None  # why this worker claims no more and leaves once idle (recycled)
        self._link: Link | None = None  # to the supervisor that started this process, if one did
        self._presence = Presence(lambda: self.store, self._call, self._registration)

    def _registration(self) -> WorkerReport:
        host, pid = socket.gethostname(), os.getpid()
        return WorkerReport(self.id, host, pid, self.queues, self.concurrency, installed_version(),
                            running=len(self._running), jobs_run=self._ran, memory_bytes=memory_bytes(),
                            orphaned=self._threads.orphaned,
                            supervisor=self._link.supervisor if self._link is not None else None)

    def _orphans_changed(self, count: int) -> None:
        """An orphaned thread came or went (on any thread): the registry (and
        ``redrive_worker_orphaned_threads``) hears of it now, not at the next heartbeat."""
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._presence.soon)
            except RuntimeError:  # the loop has closed: this worker has stopped
                pass

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = self._client.store
        return self._store

    # -- control ---------------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming and shut down gracefully; safe from any thread or signal handler."""
        if self._loop is None:
            self._stopping.set()
        else:
            self._loop.call_soon_threadsafe(self._begin_stop)

    def _begin_stop(self) -> None:
        if not self._stopping.is_set():
            log.info("worker %s stopping: no more claims", self.id)
            self._stop_began = time.monotonic()
        self._stopping.set()
        self._wake.set()

    async def _call(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Store calls block; they run on the worker's database threads (an ``Offload``)."""
        return await asyncio.get_running_loop().run_in_executor(self._db, partial(self._within, fn, *args, **kwargs))

    def _within(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        with self._bounded():
            return fn(*args, **kwargs)

    def run_until_stopped(self) -> None:
        """Run in this thread until SIGTERM or SIGINT, then shut down gracefully."""

        def asked_to_stop(signum: int, frame: Any) -> None:
            # A plain signal handler runs between the main thread's bytecodes,
            # so it is heard even while an async task holds the event loop.
            self.stop()
            if self._watchdog is not None:
                self._watchdog.stop_asked()

        async def main() -> None:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, asked_to_stop)
            if signals.stop_asked():  # a SIGTERM while the process was starting
                self.stop()
            await self.run()

        asyncio.run(main())

    # -- the loop ----------------------------------------------------------------

    async def run(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        # Asked once, not for every job (the API reads the environment each
        # time): a tracer provider is set at start-up, and only once.
        self._tracing = tracing.enabled()
        self._link = Link.current()
        store = await self._call(lambda: self.store)
        # A call may take at most half the lease TTL (never under a second,
        # which a loaded database can take): a partitioned worker hears of it
        # while its leases may still be good, and stops believing in them
        # when they may not be (``_leases_watch``). The worker's own calls
        # only: whatever else shares the store (the app's enqueues, its web
        # pages) keeps the store's deadline.
        calls_within = getattr(store, "calls_within", None)
        if calls_within is not None:
            fitting = max(self.lease_ttl / 2, _SHORTEST_DEADLINE)
            self._bounded = partial(calls_within, fitting)

        def woken(_queue: str) -> None:  # from the store's listening thread
            try:
                loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:  # the loop has closed: this worker has stopped, nobody to wake
                pass

        outages = OutageLog()
        outages.attach()
        unsubscribe = store.wakeups_subscribe(woken)
        await self._read_control()  # a paused queue is obeyed from the first claim
        shown = [f"{q}={self.queue_limits[q]}" if q in self.queue_limits else q for q in self.queues]
        log.info("worker %s started: queues=%s concurrency=%d lease_ttl=%ss",
                 self.id, ",".join(shown), self.concurrency, self.lease_ttl.total_seconds())
        self.events.emit("worker.started", worker=self.id, queues=list(self.queues),
                         concurrency=self.concurrency)
        services = [
            asyncio.create_task(self._presence.run(), name="presence"),
            asyncio.create_task(self._completer.run(), name="completer"),
            asyncio.create_task(self._control(), name="control"),
            asyncio.create_task(self._leases_watch(), name="leases"),
        ]
        beside = Beside(self._client, store, self._call, self.events, self.id, self.lease_ttl, self._rng,
                        self._wake.set)
        services += [asyncio.create_task(plugin.run(beside), name=plugin.name) for plugin in self.plugins]
        if self._gate.active:
            await self._gate.refresh()
            services.append(asyncio.create_task(self._gate.run(), name="breakers"))
        for service in services:
            service.add_done_callback(self._service_ended)
        beating = threading.Event()
        heartbeat = threading.Thread(target=self._heartbeat, args=(beating,), name="redrive-heartbeat", daemon=True)
        heartbeat.start()
        self._watchdog = Watchdog(loop, loop_thread=threading.get_ident(),
                                  grace_s=self.shutdown_grace.total_seconds(), give_back=self._give_back)
        self._watchdog.start()

        def stop_listening() -> None:
            """No claim follows, so no wake-up is of use. The listener is
            stopped on a thread of its own, not waited for: in a partition its
            thread may sit in a connect for seconds, which a stopping worker
            has no time for."""
            nonlocal unsubscribe
            if unsubscribe is not None:
                threading.Thread(target=unsubscribe, name="redrive-unlisten", daemon=True).start()
                unsubscribe = None

        try:
            await self._claim_loop()
            stop_listening()
            await self._drain()
        finally:
            beating.set()
            self._watchdog.close()
            for service in services:
                service.cancel()
            await asyncio.gather(*services, return_exceptions=True)
            await self._presence.leave(within=self._shutdown_left())
            stop_listening()
            self._db.shutdown(wait=True)
            outages.detach()
            log.info("worker %s stopped", self.id)
            self.events.emit("worker.stopped", worker=self.id)

    def _shutdown_left(self) -> float | None:
        """Seconds left for a stopping worker's last store calls. Asked to
        stop, a worker ends within its grace and one lease TTL, whatever the
        database does: the drain takes at most the grace and half the TTL,
        what follows a quarter, and the last quarter is the process's to end."""
        if self._stop_began is None:
            return None
        ends = self._stop_began + self.shutdown_grace.total_seconds() + self.lease_ttl.total_seconds() * 0.75
        return ends - time.monotonic()

    def _service_ended(self, service: asyncio.Task) -> None:
        # Without its heartbeat or completer a worker would hold leases it
        # cannot honour: stop cleanly and let the jobs go to other workers.
        if not service.cancelled() and service.exception() is not None:
            log.critical("worker %s: %s crashed, stopping", self.id, service.get_name(),
                         exc_info=service.exception())
            self._begin_stop()

    async def _claim_loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            if self._retiring is None:
                self._retiring = self._past_limits()
            if self._retiring is not None:
                if not self._running:  # all it took finished and written: time to be replaced
                    log.info("worker %s %s: leaving to be replaced", self.id, self._retiring)
                    if self._link is not None:
                        self._link.leaving(self._retiring)
                    return
                await self._pause(self.poll_interval.total_seconds())
                continue
            if self._orphans_capped() and not self._any_async:  # every job it could claim is a sync one
                await self._pause(self.poll_interval.total_seconds())
                continue
            more = False
            for (queues, limit), shared in zip(self._groups, self._limits, strict=True):
                open_queues = [q for q in queues if q not in self._paused]
                if limit is None:
                    free = self._free_slots()
                elif queues[0] in self._own:
                    free = limit - self._handling(queues[0])
                else:
                    free = min(self._free_slots(), limit - self._handling(queues[0]))
                if self._max_jobs is not None:
                    free = min(free, self._max_jobs - self._claimed)
                if not open_queues or free <= 0:
                    continue
                asked = time.monotonic()
                try:
                    claimed = await self._call(
                        self.store.jobs_claim, queues=open_queues, limit=free,
                        worker_id=self.id, lease_ttl=self.lease_ttl, blocked=self._gate.blocked(),
                        limits=shared or None,
                    )
                except StoreError as exc:
                    log.warning("claim failed, retrying: %s", exc)
                    await self._pause(STORE_RETRY_PAUSE_S)
                    break
                announce = self.events.wants("job.claimed")
                self._claimed += len(claimed)
                for job in claimed:
                    if announce:
                        self._announce_claim(job)
                    self._start(job, asked)
                more = more or len(claimed) == free  # the queue may hold more: claim again at once
            if not more:
                await self._pause(self.poll_interval.total_seconds())

    def _past_limits(self) -> str | None:
        """Why this worker should claim no more and be replaced, if it should."""
        if self._max_jobs is not None and self._claimed >= self._max_jobs:
            return f"ran its {self._max_jobs} jobs"
        if self._max_memory is not None and (used := memory_bytes()) >= self._max_memory:
            return f"uses {used / 2**20:.0f} MiB, past its limit of {self._max_memory / 2**20:.0f} MiB"
        return None

    def _orphans_capped(self) -> bool:
        """Whether as many sync runs as allowed were abandoned and run on
        (said once each way)."""
        capped = self._threads.orphaned >= self.max_orphans
        if capped != self._capped:
            self._capped = capped
            if capped:
                log.warning("worker %s: %d threads of abandoned sync runs still run (the cap, "
                            "REDRIVE_WORKER_MAX_ORPHANS): it starts no sync job until one returns; restart it, "
                            "or run --processes with hard_timeout= so such runs are killed",
                            self.id, self._threads.orphaned)
            else:
                log.info("worker %s: an orphaned thread returned; sync jobs start here again", self.id)
        return capped

    def _handling(self, queue: str) -> int:
        return sum(1 for r in self._running.values() if not r.finishing and r.job.queue == queue)

    def _free_slots(self) -> int:
        """A slot frees when its handler returns, so the next claim overlaps the
        last batch's outcome write. Leases held while writes are under way
        are capped at another ``concurrency``, for a store slow to take them."""
        if self._own:  # redrive's own jobs hold slots of their own
            runs = [r for r in self._running.values() if r.job.queue not in self._own]
            handling = sum(1 for r in runs if not r.finishing)
            return min(self.concurrency - handling, 2 * self.concurrency - len(runs))
        handling = sum(1 for r in self._running.values() if not r.finishing)
        return min(self.concurrency - handling, 2 * self.concurrency - len(self._running))

    def _handled(self, running: _Running) -> None:
        running.finishing = True
        self._wake.set()

    async def _pause(self, seconds: float) -> None:
        """Sleep until woken (new jobs, a free slot, stop) or ``seconds`` pass."""
        try:
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)
        except TimeoutError:
            pass

    def _start(self, job: Job, asked: float) -> None:
        assert self._loop is not None
        running = _Running(job, job.lease, Interrupt(self._loop), asked)  # (positional: one a job)
        self._running[running.lease.token.int] = running
        running.future = running.interrupt.run = eager.start(self._run_one(running))

    async def _run_one(self, running: _Running) -> None:
        job = running.job
        loop = asyncio.get_running_loop()
        started = loop.time()
        submitted = False
        traced = await self._traced(job) if self._tracing else None
        try:
            task = self.registry.tasks.get(job.task)
            if task is not None and not task.is_async and self._orphans_capped():
                self._handled(running)  # another worker may run it: back, unspent, for a while
                await self._requeue([Requeue(job.lease, _HOLD_DELAY, meta={"reason": "orphaned_threads"})])
                return
            # (most jobs pass closed breakers, or none: no coroutine to make for them)
            refusal = None if not job.dependencies or self._gate.closed_for(job) else await self._admit(job)
            if refusal is None:
                # the supervisor keeps the hard limit: it kills this process if the run overruns
                hard = task.hard_timeout if task is not None else None
                link = self._link if hard is not None else None
                if link is not None and hard is not None:
                    link.started(job, hard.total_seconds())
                try:
                    execution = await execute(
                        task, job, classifier=self.registry.classifier,
                        threads=self._threads, rng=self._rng, store=self.store, interrupt=running.interrupt,
                        gate=self._gate if self._gate.active else None, events=self.events,
                        supervised=self._link is not None,
                    )
                finally:
                    if link is not None:
                        # A thread abandoned at the soft limit still runs: the hard
                        # limit holds for it until it returns (the supervisor kills
                        # this process if it does not in time).
                        self._threads.when_done(job.lease_token, partial(link.ended, job))
                if execution.held_by is not None:  # a guarded call found its breaker open
                    refusal = self._gate.refusal(execution.held_by)
                elif job.dependencies:
                    classifier = (task.classifier if task else None) or self.registry.classifier
                    if self._gate.holds_trial(job):
                        await self._gate.record(job, execution.outcome, loop.time() - started, classifier,
                                                execution.guarded)
                    else:  # most jobs: nothing to wait for
                        self._gate.note_outcome(job, execution.outcome, loop.time() - started, classifier,
                                                execution.guarded)
            if refusal is not None:
                if not refusal.fails_fast:
                    self._handled(running)
                    await self._hold(job, refusal)
                    return
                execution = self._fail_fast(job, refusal)
            self._handled(running)
            if running.abandoned:
                return
            duration_s = loop.time() - started
            wait_s = queue_wait(job, self.lease_ttl)
            item = finish_of(running.lease, execution, round(duration_s * 1000), round(wait_s * 1000))
            if traced is not None:
                traced.end(*_traced_outcome(item))
            self._completer.submit(item, job.attempts, partial(self._written, running, item, duration_s, wait_s))
            submitted = True  # the slot is given back once the write lands
        finally:
            if traced is not None:
                traced.end("held" if not running.abandoned else "lost")  # no-op once ended
            if not submitted:
                self._release(running)

    async def _traced(self, job: Job) -> tracing.Run | None:
        """The run's span, linked to its enqueue's (read from the job's creation event)."""
        try:
            events = await self._call(self.store.job_events_list, job_id=job.id)
        except StoreError:
            events = []
        return tracing.Run(job, self.id, tracing.sent_carrier(events))

    def _fail_fast(self, job: Job, refusal: Refusal) -> Execution:
        task = self.registry.tasks.get(job.task)
        # Dependency() refuses a fail-fast declaration without a fail_code.
        assert refusal.dependency.fail_code is not None
        return fail_fast(job, dependency=refusal.dependency.name, fail_code=refusal.dependency.fail_code,
                         stages=stages_of(task, job) if task is not None else (Stage(job.task),),
                         classifier=self.registry.classifier, rng=self._rng,
                         for_good=refusal.dependency.fail_for_good)

    def _written(self, running: _Running, item: Finish, duration_s: float, wait_s: float,
                 done: Finished | None) -> None:
        job = running.job
        if done is None:
            log.warning("lost the lease on job %s (%s, attempt %d): dropping its %s",
                        job.id, job.task, job.attempts, KINDS[type(item)])
            if not running.lost:
                self._lost(running)
        elif self.events.active and (type(item) is not Completion or self.events.wants("job.succeeded")):
            # a success nobody listens to (the most common ending) builds nothing
            announce(self.events, done, duration_s=duration_s, wait_s=wait_s)
        self._release(running)

    def _lost(self, running: _Running) -> None:
        running.lost = True
        job = running.job
        self.events.emit("job.lease_lost", job_id=str(job.id), task=job.task, queue=job.queue,
                         lease_token=str(job.lease_token), worker=self.id)

    def _announce_claim(self, job: Job) -> None:
        self.events.emit("job.claimed", job_id=str(job.id), task=job.task, queue=job.queue,
                         attempt=job.attempts, worker=self.id, lease_token=str(job.lease_token),
                         wait_s=queue_wait(job, self.lease_ttl))

    def _release(self, running: _Running) -> None:
        if self._running.pop(running.lease.token.int, None) is not None:
            self._ran += 1
        if self._max_memory is not None and self._retiring is None:
            self._retiring = self._past_limits()  # at once: the next claim must not add a job's worth
        self._wake.set()
        if not self._running:
            self._idle.set()

    async def _admit(self, job: Job) -> Refusal | None:
        """For a job one of whose breakers is not closed (``closed_for``)."""
        try:
            return await self._gate.admit(job)
        except StoreError as exc:
            # Without the shared state a permit cannot be given: hold the job.
            log.warning("breaker check for job %s failed: %s", job.id, exc)
            declared = [n for n in job.dependencies if n in self.registry.dependencies]
            return Refusal(self.registry.dependencies[declared[0]])

    async def _hold(self, job: Job, refusal: Refusal) -> None:
        """Hold-queue: back to queued, no attempt spent, due again shortly."""
        name = refusal.dependency.name
        log.info("job %s (%s) held: dependency %s is open", job.id, job.task, name)
        self.events.emit("job.held", job_id=str(job.id), task=job.task, queue=job.queue, dependency=name)
        await self._requeue([Requeue(job.lease, _HOLD_DELAY, meta={"reason": "breaker_open", "dependency": name})])

    # -- pauses and cancels ------------------------------------------------------

    async def _control(self) -> None:
        while True:
            await asyncio.sleep(CONTROL_INTERVAL_S)
            await self._read_control()

    async def _read_control(self) -> None:
        """What every worker obeys: the paused queues, and the cancels asked of
        the jobs this worker runs."""
        live = [r for r in self._running.values() if not (r.finishing or r.abandoned)]
        try:
            control = await self._call(self.store.control_read, job_ids=[r.job.id for r in live])
        except StoreError as exc:
            log.warning("reading pauses and cancels failed, retrying: %s", exc)
            return
        for r in live:
            by = control.cancels.get(r.job.id)
            if by is not None and r.interrupt.cancel_by is None and not r.finishing:
                task = self.registry.tasks.get(r.job.task)
                log.info("job %s (%s): cancel asked by %s, stopping it", r.job.id, r.job.task, by)
                r.interrupt.cancel(by, is_async=task is not None and task.is_async)
        paused = frozenset(q for q in control.paused if q in self.queues)
        for queue in sorted(paused - self._paused):
            log.info("queue %s paused by %s: no job of it starts here until it is resumed",
                     queue, control.paused[queue])
        for queue in sorted(self._paused - paused):
            log.info("queue %s resumed", queue)
        if self._paused - paused:
            self._wake.set()
        self._paused = paused

    # -- leases ------------------------------------------------------------------

    def _heartbeat(self, done: threading.Event) -> None:
        """Renew the leases of running jobs, on a thread of its own: an async
        task that holds the event loop must not cost every job its lease."""
        store = self.store
        with self._bounded():  # this thread's calls, for its whole life
            while not done.wait(self.lease_ttl.total_seconds() / 3):
                # list() copies in one step under the GIL: safe beside the loop's changes
                live = [r for r in list(self._running.values()) if not (r.finishing or r.lost or r.abandoned)]
                if not live:
                    continue
                asked = time.monotonic()
                try:
                    held = store.leases_extend(leases=[r.lease for r in live], lease_ttl=self.lease_ttl)
                except StoreError as exc:
                    log.warning("heartbeat failed, retrying: %s", exc)
                    continue
                for r in live:
                    if r.lease in held:
                        r.extended_at = asked
                gone = [r for r in live if r.lease not in held]
                if gone and self._loop is not None:
                    self._loop.call_soon_threadsafe(self._leases_gone, gone)

    def _leases_gone(self, gone: list[_Running]) -> None:
        for r in gone:
            if not (r.finishing or r.lost):
                self._lost(r)
                log.warning("lost the lease on job %s (%s): another worker may run it", r.job.id, r.job.task)

    async def _leases_watch(self) -> None:
        """A lease not extended for a whole TTL (the database did not answer
        the heartbeats) may be another worker's by now: its run is given up
        at once, its handler told to stop and its outcome dropped, rather
        than found out when the database answers again."""
        ttl = self.lease_ttl.total_seconds()
        while True:
            await asyncio.sleep(min(0.5, ttl / 10))
            now = time.monotonic()
            # (a run given back on shutdown is not the heartbeat's any more, nor is it lost)
            for r in [r for r in self._running.values()
                      if not (r.lost or r.abandoned) and now - r.extended_at >= ttl]:
                log.warning("lost the lease on job %s (%s): it was not extended for %gs (the database did not "
                            "answer), so another worker may run it now: dropping this run", r.job.id, r.job.task, ttl)
                self._give_up(r)

    def _give_up(self, r: _Running) -> None:
        """This run's lease is gone: announce it, stop its handler (an async
        one is cancelled, a sync one told through ``redrive.cancelled()``)
        and wait for none of its writes."""
        self._lost(r)
        if r.finishing:
            self._completer.drop(r.lease)
            return
        r.abandoned = True
        r.interrupt.shutdown()
        if r.future is not None:
            r.future.cancel()

    def _give_back(self) -> int:
        """For the watchdog, from its thread: requeue every job held, straight to the store."""
        items = [Requeue(r.lease) for r in list(self._running.values()) if not r.lost]
        return len(self._within(self.store.jobs_finish, items)) if items else 0

    # -- shutdown ----------------------------------------------------------------

    async def _drain(self) -> None:
        """After the grace, at most half a lease TTL more to give the rest back
        and let the last writes land, whatever the database does: a worker
        asked to stop during a partition stops."""
        in_flight = [r.future for r in self._running.values() if r.future is not None]
        if in_flight:
            log.info("waiting up to %ss for %d in-flight jobs",
                     self.shutdown_grace.total_seconds(), len(in_flight))
            await asyncio.wait(in_flight, timeout=self.shutdown_grace.total_seconds())
        until = time.monotonic() + self.lease_ttl.total_seconds() / 2
        unfinished = [r for r in self._running.values() if not r.finishing]
        if unfinished:
            for r in unfinished:
                r.abandoned = True
                r.interrupt.shutdown()  # a sync handler polling redrive.cancelled() may stop
            requeued = await self._requeue([Requeue(r.lease) for r in unfinished if not r.lost], until=until)
            log.info("requeued %d unfinished jobs: %s", len(requeued),
                     ", ".join(str(done.lease.job_id) for done in requeued))
            for r in unfinished:
                if r.future is not None:
                    r.future.cancel()
        # Jobs already finishing are writing their outcome: let the writes land
        # while there is time (after their leases the writes would be refused anyway).
        if self._running:
            self._idle.clear()
            try:
                await asyncio.wait_for(self._idle.wait(), timeout=max(0.0, until - time.monotonic()))
            except TimeoutError:
                log.warning("%d outcomes were not written before the worker had to stop: their jobs "
                            "return to the queue when their leases expire", len(self._running))

    async def _requeue(self, items: list[Requeue], *, until: float | None = None) -> list[Finished]:
        """Give jobs back; retried while the leases may still be ours (and,
        on shutdown, ``until`` then). Past that the reclaim takes them."""
        leases = {item.lease for item in items}
        while True:
            try:
                return await self._call(self.store.jobs_finish, items)
            except StoreError as exc:
                runs = [r for r in self._running.values() if r.lease in leases]
                expires = min((r.extended_at for r in runs), default=0.0) + self.lease_ttl.total_seconds()
                if time.monotonic() + STORE_RETRY_PAUSE_S >= min(expires, until or expires):
                    # the error as text: an outage's repeats are muted (OutageLog), this line is not
                    log.warning("could not give back %d jobs (%s): they return to the queue when their "
                                "leases expire", len(items), str(exc))
                    return []
                log.warning("giving back %d jobs failed, retrying: %s", len(items), exc)
                await asyncio.sleep(STORE_RETRY_PAUSE_S)


def queue_wait(job: Job, lease_ttl: timedelta) -> float:
    """Seconds from when the job was due to when this attempt's lease was
    taken, both on the database's clock."""
    if job.lease_expires_at is None:
        return 0.0
    # (one difference of times, not two: a worker asks this of every job)
    return max(0.0, (job.lease_expires_at - job.run_at).total_seconds() - lease_ttl.total_seconds())


def _traced_outcome(item: Finish) -> tuple[str, str | None]:
    match item:
        case Completion():
            return "succeeded", None
        case RetryLater():
            return "retry", item.error_code
        case FailNow():
            return "failed", item.error_code
    return "cancelled", None
