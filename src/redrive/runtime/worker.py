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
import socket
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from datetime import timedelta
from functools import partial
from random import Random
from typing import ParamSpec, TypeVar

from redrive import tracing
from redrive.client import Client
from redrive.core.job import Job
from redrive.core.transitions import KINDS, Completion, Finish, Finished, Requeue, finish_of
from redrive.errors import StoreError
from redrive.runtime import eager
from redrive.runtime.breakers import BreakerGate
from redrive.runtime.claiming import Claiming
from redrive.runtime.completer import Completer, announce
from redrive.runtime.executor import execute
from redrive.runtime.holding import HOLD_DELAY, Holding
from redrive.runtime.interrupts import Interrupt
from redrive.runtime.link import Link
from redrive.runtime.maintenance import Pruner, Reclaimer, RollupCompactor
from redrive.runtime.options import WorkerOptions
from redrive.runtime.outage import OutageLog
from redrive.runtime.plugins import Beside, Plugin
from redrive.runtime.presence import Presence, installed_version, memory_bytes
from redrive.runtime.running import Running, queue_wait, traced_outcome
from redrive.runtime.scheduler import Scheduler
from redrive.runtime.threads import DaemonThreadPool
from redrive.runtime.watchdog import Watchdog
from redrive.store.port import Store, WorkerReport

log = logging.getLogger("redrive.worker")

P = ParamSpec("P")
T = TypeVar("T")



_SHORTEST_DEADLINE = timedelta(seconds=1)  # for a store call, however short the lease


class Worker(Holding, Claiming):
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
        options = self.options = WorkerOptions.of(
            client.settings, queues=queues, concurrency=concurrency, lease_ttl=lease_ttl,
            shutdown_grace=shutdown_grace, poll_interval=poll_interval, retention=retention, plugins=plugins,
            max_jobs=max_jobs, max_memory=max_memory)
        self.registry = client.registry
        self.events = client.events
        self._client = client
        self.queues = list(options.queues)
        self.queue_limits = dict(options.queue_limits)
        self._groups = [(list(queues), limit) for queues, limit in options.groups]
        self._limits = [self.registry.limits.for_queues(queues) for queues, _ in self._groups]
        self.concurrency = options.concurrency
        self.lease_ttl = options.lease_ttl
        self.shutdown_grace = options.shutdown_grace
        self.poll_interval = options.poll_interval
        self.retention = options.retention
        self.id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._rng = rng or Random()
        self._own = options.own
        self.max_orphans = options.max_orphans
        self._max_jobs = options.max_jobs
        self._max_memory = options.max_memory
        self._any_async = any(task.is_async for task in self.registry.tasks.values())
        self._threads = DaemonThreadPool(self.concurrency + options.own_slots, on_orphans=self._orphans_changed)
        self._db = ThreadPoolExecutor(max_workers=2, thread_name_prefix="redrive-db")
        self._store: Store | None = None  # opened on the database threads when the worker starts
        self._completer = Completer(self._call, lambda: self.store)
        self._gate = BreakerGate(self.registry.dependencies, lambda: self.store, self._call, events=self.events)
        self.plugins: list[Plugin] = [Reclaimer(), RollupCompactor(), *plugins]
        if schedules and self.registry.schedules:
            self.plugins.append(Scheduler(client))
        if self.retention > timedelta(0):
            self.plugins.append(Pruner(self.retention))
        self._presence = Presence(lambda: self.store, self._call, self._registration)
        self._kept()

    def _kept(self) -> None:
        """What the worker keeps track of as it runs."""
        # Keyed by lease token, not job id: a job whose lease was taken from a
        # paused run can come back to this same worker while that run still
        # goes on, and each run must be waited for and released on its own.
        # (By the token's number: a UUID hashes in Python, an int in C.)
        self._running: dict[int, Running] = {}
        self._paused: frozenset[str] = frozenset()
        self._tracing = False
        # What bounds each of this worker's store calls (``run`` sets it): none until the store is open.
        self._bounded: Callable[[], AbstractContextManager[object]] = nullcontext
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = asyncio.Event()
        self._stop_began: float | None = None  # when a stop was asked for (monotonic), if one was
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()  # nothing running and no outcome left to write
        self._watchdog: Watchdog | None = None
        self._capped = False  # as many orphaned threads as allowed: no sync job starts here
        self._claimed = 0  # jobs claimed so far, for max_jobs
        self._ran = 0  # jobs run to an end or handed back
        self._retiring: str | None = None  # why this worker claims no more and leaves once idle (recycled)
        self._link: Link | None = None  # to the supervisor that started this process, if one did

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

    async def _call(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Store calls block; they run on the worker's database threads (an ``Offload``)."""
        return await asyncio.get_running_loop().run_in_executor(self._db, partial(self._within, fn, *args, **kwargs))

    def _within(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        with self._bounded():
            return fn(*args, **kwargs)

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
        listening = Listening(store.wakeups_subscribe(woken))
        await self._read_control()  # a paused queue is obeyed from the first claim
        shown = [f"{q}={self.queue_limits[q]}" if q in self.queue_limits else q for q in self.queues]
        log.info("worker %s started: queues=%s concurrency=%d lease_ttl=%ss",
                 self.id, ",".join(shown), self.concurrency, self.lease_ttl.total_seconds())
        self.events.emit("worker.started", worker=self.id, queues=list(self.queues),
                         concurrency=self.concurrency)
        services = await self._services(store)
        beating = threading.Event()
        heartbeat = threading.Thread(target=self._heartbeat, args=(beating,), name="redrive-heartbeat", daemon=True)
        heartbeat.start()
        self._watchdog = Watchdog(loop, loop_thread=threading.get_ident(),
                                  grace_s=self.shutdown_grace.total_seconds(), give_back=self._give_back)
        self._watchdog.start()
        try:
            await self._claim_loop()
            listening.stop()
            await self._drain()
        finally:
            beating.set()
            self._watchdog.close()
            for service in services:
                service.cancel()
            await asyncio.gather(*services, return_exceptions=True)
            await self._presence.leave(within=self._shutdown_left())
            listening.stop()
            self._db.shutdown(wait=True)
            outages.detach()
            log.info("worker %s stopped", self.id)
            self.events.emit("worker.stopped", worker=self.id)

    async def _services(self, store: Store) -> list[asyncio.Task[None]]:
        """What runs beside the claim loop: presence, the completer, control,
        the lease watch, the plugins and, with breakers, their gate; one
        that crashes stops the worker."""
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
        return services

    def _start(self, job: Job, asked: float) -> None:
        assert self._loop is not None
        running = Running(job, job.lease, Interrupt(self._loop), asked)  # (positional: one a job)
        self._running[running.lease.token.int] = running
        running.future = running.interrupt.run = eager.start(self._run_one(running))

    async def _run_one(self, running: Running) -> None:
        job = running.job
        loop = asyncio.get_running_loop()
        started = loop.time()
        submitted = False
        traced = await self._traced(job) if self._tracing else None
        try:
            task = self.registry.tasks.get(job.task)
            if task is not None and not task.is_async and self._orphans_capped():
                self._handled(running)  # another worker may run it: back, unspent, for a while
                await self._requeue([Requeue(job.lease, HOLD_DELAY, meta={"reason": "orphaned_threads"})])
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
                        supervised=self._link is not None, spawner=self._client.plan_workflow,
                    )
                finally:
                    if link is not None:
                        # A thread abandoned at the soft limit still runs: the hard
                        # limit holds for it until it returns (the supervisor kills
                        # this process if it does not in time).
                        self._threads.when_done(job.lease_token, partial(link.ended, job))
                if execution.lease_lost:
                    log.warning("lost the lease on job %s (%s, attempt %d): a write of its run was refused; "
                                "dropping this run", job.id, job.task, job.attempts)
                    self._lost(running)
                    return
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
                traced.end(*traced_outcome(item))
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

    def _written(self, running: Running, item: Finish, duration_s: float, wait_s: float,
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

    def _announce_claim(self, job: Job) -> None:
        self.events.emit("job.claimed", job_id=str(job.id), task=job.task, queue=job.queue,
                         attempt=job.attempts, worker=self.id, lease_token=str(job.lease_token),
                         wait_s=queue_wait(job, self.lease_ttl))

    def _release(self, running: Running) -> None:
        if self._running.pop(running.lease.token.int, None) is not None:
            self._ran += 1
        if self._max_memory is not None and self._retiring is None:
            self._retiring = self._past_limits()  # at once: the next claim must not add a job's worth
        self._wake.set()
        if not self._running:
            self._idle.set()



class Listening:
    """The store's wake-ups, until no claim follows and none is of use. The
    listener is stopped on a thread of its own, not waited for: in a
    partition its thread may sit in a connect for seconds, which a stopping
    worker has no time for."""

    def __init__(self, unsubscribe: Callable[[], None] | None) -> None:
        self._unsubscribe = unsubscribe

    def stop(self) -> None:
        if self._unsubscribe is not None:
            threading.Thread(target=self._unsubscribe, name="redrive-unlisten", daemon=True).start()
            self._unsubscribe = None
