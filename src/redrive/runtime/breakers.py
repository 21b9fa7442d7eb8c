"""The worker's side of the shared circuit breakers.

The hot path stays off the store: the claim skips dependencies this worker
last saw blocked (refreshed every ``REFRESH_S``), a job whose dependencies are
closed starts without a store call, and call outcomes are folded into the
shared state in batches. Only a breaker that is not closed costs a store
read-modify-write per job (for the half-open permits, which must be exact).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from redrive.core.breaker import (
    Breaker,
    BreakerMode,
    BreakerPolicy,
    Call,
    State,
    admit,
    failed_call,
    probe_passed,
    record,
    trial_returned,
)
from redrive.core.classify import Classifier, Failure
from redrive.core.job import Job
from redrive.core.outcome import Failed, Retry, Succeeded
from redrive.declarations import Dependency
from redrive.errors import StoreError, UnknownDependency
from redrive.runtime.offload import Offload
from redrive.store.port import Store
from redrive.stream import EventStream

log = logging.getLogger("redrive.breakers")

T = TypeVar("T")

REFRESH_S = 0.25


@dataclass(frozen=True, slots=True)
class Refusal:
    """A job may not run now: ``dependency`` is open (or out of trial permits)."""

    dependency: Dependency
    half_open: bool = False  # a trial is under way: the dependency may well be healthy

    @property
    def fails_fast(self) -> bool:
        """Fail-fast fails jobs only while the breaker is open: while a trial
        decides, the jobs it leaves out wait (held) rather than fail."""
        return BreakerMode(self.dependency.mode) is BreakerMode.FAIL_FAST and not self.half_open


class BreakerGate:
    def __init__(self, dependencies: Mapping[str, Dependency], store: Callable[[], Store],
                 call: Offload, *, events: EventStream | None = None) -> None:
        self.dependencies = dependencies
        self._events = events or EventStream()
        self._store = store
        self._call = call  # runs a blocking store call off the event loop
        self._view: dict[str, Breaker] = {}
        self._clock_offset = 0.0  # database epoch minus local epoch
        self._pending: dict[str, list[Call]] = defaultdict(list)
        self._pending_lock = threading.Lock()  # guarded calls note from handler threads
        self._trials: dict[object, set[str]] = {}

    @property
    def active(self) -> bool:
        return bool(self.dependencies)

    def dependency(self, name: str) -> Dependency:
        if name not in self.dependencies:
            known = ", ".join(sorted(self.dependencies)) or "none"
            raise UnknownDependency(f"no dependency named {name!r} is declared (known: {known})")
        return self.dependencies[name]

    def _now(self) -> float:
        return time.time() + self._clock_offset

    # -- the claim -------------------------------------------------------------

    def blocked(self) -> list[str]:
        """Hold-mode dependencies whose jobs should not even be claimed."""
        now, names = self._now(), []
        for name, dependency in self.dependencies.items():
            b = self._view.get(name)
            if b is None or BreakerMode(dependency.mode) is not BreakerMode.HOLD:
                continue
            if b.state is State.OPEN:
                waiting = b.forced or dependency.probe is not None or b.opened_at is None \
                    or now < b.opened_at + dependency.policy.wait.total_seconds()
                if waiting:
                    names.append(name)
            elif b.state is State.HALF_OPEN and b.trials_started >= dependency.policy.trial_calls \
                    and (b.trial_at is None or now < b.trial_at + dependency.policy.wait.total_seconds()):
                names.append(name)
        return names

    # -- around one job ----------------------------------------------------------

    def closed_for(self, job: Job) -> bool:
        """Whether every breaker the job passes is closed (or has none here):
        then ``admit`` has nothing to ask and nothing to refuse."""
        view = self._view
        for name in job.dependencies:
            b = view.get(name)
            if b is not None and b.state is not State.CLOSED and name in self.dependencies:
                return False
        return True

    async def admit(self, job: Job) -> Refusal | None:
        trials = set()
        for name in job.dependencies:
            dependency = self.dependencies.get(name)
            b = self._view.get(name)
            if dependency is None or b is None or b.state is State.CLOSED:
                continue  # an undeclared dependency here has no breaker in this deploy
            allowed = await self._call(self._admit, dependency=dependency)
            if not allowed:
                return Refusal(dependency, half_open=self._view[name].state is State.HALF_OPEN)
            if self._view[name].state is State.HALF_OPEN:
                trials.add(name)
        if trials:
            self._trials[job.lease_token] = trials
        return None

    def refusal(self, name: str) -> Refusal:
        """Why a guarded call to ``name`` was refused, as the view now has it."""
        b = self._view.get(name)
        return Refusal(self.dependencies[name], half_open=b is not None and b.state is State.HALF_OPEN)

    def admit_now(self, name: str) -> bool:
        """For a guarded call, from the handler's thread."""
        b = self._view.get(name)
        return b is None or b.state is State.CLOSED or self._admit(self.dependencies[name])

    def verdict(self, name: str, failure: Failure | None, classifier: Classifier) -> bool | None:
        """A call to ``name`` that ended with ``failure`` (None: it worked):
        True, False, or None when the failure was not the dependency's."""
        if failure is None:
            return True
        return False if failed_call(failure, self.dependencies[name].policy, classifier) else None

    def note(self, name: str, ok: bool | None, duration_s: float) -> None:
        """One call's result (None: it says nothing about the dependency); a
        success slower than ``slow_call`` counts as a failure."""
        if ok is None:
            return
        slow = self.dependencies[name].policy.slow_call
        if slow is not None and duration_s > slow.total_seconds():
            ok = False
        with self._pending_lock:
            self._pending[name].append(Call(self._now(), ok))

    def _admit(self, dependency: Dependency) -> bool:
        granted: list[bool] = []

        def change(b: Breaker, now: float) -> Breaker:
            allowed, after = admit(b, dependency.policy, now, probe_decides=dependency.probe is not None)
            granted.append(allowed)
            return after

        self._view[dependency.name] = self._logged(
            dependency.name, self._store().breaker_update(name=dependency.name, change=change))
        return granted[-1]

    def holds_trial(self, job: Job) -> bool:
        """Whether the job runs one of a half-open breaker's trial calls:
        then its outcome is recorded with ``record``, else ``note_outcome`` will do."""
        # (most jobs hold none: then no token is hashed to look for one)
        return bool(self._trials) and job.lease_token in self._trials

    def note_outcome(self, job: Job, outcome: Any, duration_s: float, classifier: Classifier,
                     guarded: frozenset[str] = frozenset(), trials: frozenset[str] | set[str] = frozenset(),
                     ) -> set[str]:
        """A job's outcome counts as a call to each dependency it declared:
        success, or failure when its code is the dependency's (``failed_call``),
        or a success slower than ``slow_call``. Any other failure counts for
        nothing: it was not the dependency's. Answers the ``trials`` that got
        no verdict. Waits for nothing: a job without a trial (``holds_trial``)
        needs no more than this."""
        returned: set[str] = set()
        succeeded = isinstance(outcome, Succeeded)  # most jobs: then no verdict to ask for
        failure = outcome.failure if not succeeded and isinstance(outcome, (Retry, Failed)) else None
        verdictless = failure is None and not succeeded  # cancelled
        for name in job.dependencies:
            if name not in self.dependencies or name in guarded:
                continue
            ok = True if succeeded else None if verdictless else self.verdict(name, failure, classifier)
            if ok is None:
                if name in trials:
                    returned.add(name)
                continue
            self.note(name, ok, duration_s)
        return returned

    async def record(self, job: Job, outcome: Any, duration_s: float, classifier: Classifier,
                     guarded: frozenset[str] = frozenset()) -> None:
        """``note_outcome``, and for a job that held trials, what they decide:
        a trial with no verdict goes to the next job, one with a verdict is
        written at once."""
        trials: set[str] = self._trials.pop(job.lease_token, set()) if self._trials else set()
        returned = self.note_outcome(job, outcome, duration_s, classifier, guarded, trials)
        for name in returned:  # no verdict: the next job gets the trial
            b = await self._call(self._store().breaker_update, name=name, change=lambda b, now: trial_returned(b))
            self._view[name] = self._logged(name, b)
        if trials - returned:  # a half-open breaker waits on this result: no batching
            await self.flush()

    # -- the service: refresh, flush, probe ----------------------------------------

    async def run(self) -> None:
        while True:
            try:
                await self.flush()
                await self.refresh()
                await self._probe()
            except StoreError as exc:
                log.warning("breaker state not synced, retrying: %s", exc)
            await asyncio.sleep(REFRESH_S)

    async def refresh(self) -> None:
        breakers, now = await self._call(self._store().breakers_list)
        self._clock_offset = now - time.time()
        self._view = breakers

    async def flush(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, defaultdict(list)
        for name, calls in pending.items():
            policy = self.dependencies[name].policy
            try:
                b = await self._call(self._store().breaker_update, name=name,
                                     change=partial(_fold, policy=policy, calls=calls))
            except StoreError:
                with self._pending_lock:
                    self._pending[name][:0] = calls  # keep them for the next flush
                raise
            self._view[name] = self._logged(name, b)

    async def _probe(self) -> None:
        for name, dependency in self.dependencies.items():
            b = self._view.get(name)
            if dependency.probe is None or b is None or b.state is not State.OPEN or b.forced:
                continue
            if not await self._call(self._take_probe_slot, dependency=dependency):
                continue
            limit = dependency.probe_interval.total_seconds()
            try:
                # Off the event loop, and no longer than its interval: a sync
                # probe (httpx.get) on the loop would stall every heartbeat.
                if inspect.iscoroutinefunction(dependency.probe):
                    healthy = await asyncio.wait_for(dependency.probe(), timeout=limit)
                else:
                    healthy = await asyncio.wait_for(asyncio.to_thread(dependency.probe), timeout=limit)
                    if inspect.isawaitable(healthy):
                        healthy = await asyncio.wait_for(healthy, timeout=limit)
            except TimeoutError:
                log.info("health probe of %s took longer than %.0f s: not healthy yet", name, limit)
                healthy = False
            except Exception as exc:  # a probe that raises says "not yet"
                log.info("health probe of %s failed: %s", name, exc)
                healthy = False
            if healthy:
                b = await self._call(self._store().breaker_update, name=name,
                                     change=lambda b, now: probe_passed(b, now))
                self._view[name] = self._logged(name, b)

    def _take_probe_slot(self, dependency: Dependency) -> bool:
        taken: list[bool] = []
        interval = dependency.probe_interval.total_seconds()

        def change(b: Breaker, now: float) -> Breaker:
            due = b.state is State.OPEN and (b.probed_at is None or now >= b.probed_at + interval)
            taken.append(due)
            return replace(b, probed_at=now) if due else b

        self._store().breaker_update(name=dependency.name, change=change)
        return taken[-1]

    def _logged(self, name: str, b: Breaker) -> Breaker:
        for before, after, reason in b.changes:
            log.warning("breaker %s: %s -> %s (%s)", name, before, after, reason)
            self._events.emit("breaker.changed", dependency=name, from_state=before.value, to_state=after.value,
                              reason=reason)
        return b


def _fold(b: Breaker, now: float, *, policy: BreakerPolicy, calls: list[Call]) -> Breaker:
    return record(b, policy, calls, now)

