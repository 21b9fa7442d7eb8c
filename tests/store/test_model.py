"""Every store against a plain model of the job lifecycle (Hypothesis stateful
testing): enqueue, claim, heartbeat, the clock moving on, reclaim, complete,
fail, retry, cancel, revive, and writes with leases that are no longer held.
After every step each job the model knows is what the store says it is."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from redrive.core.dead_letters import MANUAL_RETRY, Revival, revive_plan
from redrive.core.job import Lease
from redrive.core.states import TERMINAL, Status
from redrive.core.transitions import Completion, FailNow, Finish, RetryLater
from redrive.errors import IllegalTransition
from redrive.store.memory import MemoryStore
from redrive.store.port import Store
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SQLiteStore
from redrive.testing import Clock, applied, cancel, new, reclaim

TTL = timedelta(seconds=30)


@dataclass
class Expected:
    status: Status
    attempts: int = 0
    due: datetime | None = None
    lease: Lease | None = None
    expires: datetime | None = None
    cancel_asked: bool = False


class Lifecycle(RuleBasedStateMachine):
    def __init__(self, open_store: Callable[[Clock], Store]) -> None:
        super().__init__()
        self.clock = Clock()
        self.store = open_store(self.clock)
        self.queue = f"q-{uuid.uuid4().hex[:8]}"  # a queue of this run's own: the database may be shared
        # Job ids in the order the run makes them (the store breaks ties by id):
        # random ids would let a replay claim or cancel other jobs than the run did.
        self.ids = uuid.uuid4().int >> 64 << 64
        self.jobs: dict[uuid.UUID, Expected] = {}
        self.old_leases: list[Lease] = []  # leases that were held once and are no longer

    def teardown(self) -> None:
        self.store.close()

    def _with(self, status: Status) -> list[uuid.UUID]:
        # In the order they were made: ids made within one millisecond do not
        # sort the same way every run, and a replay must pick the same job.
        return [i for i, e in self.jobs.items() if e.status is status]

    def _take(self, status: Status, pick: int) -> uuid.UUID | None:
        found = self._with(status)
        return found[pick % len(found)] if found else None

    def _drop_lease(self, expected: Expected) -> None:
        if expected.lease is not None:
            self.old_leases.append(expected.lease)
        expected.lease = expected.expires = None

    # -- rules --------------------------------------------------------------------

    @precondition(lambda self: len(self.jobs) < 4)  # few jobs, many turns each: deep histories
    @rule(delayed=st.booleans())
    def enqueue(self, delayed: bool) -> None:
        job = replace(new(queue=self.queue, delay=timedelta(seconds=45) if delayed else None),
                      id=uuid.UUID(int=self.ids | len(self.jobs)))
        (made,) = self.store.jobs_insert(jobs=[job])
        self.jobs[made.job.id] = Expected(Status.SCHEDULED if delayed else Status.QUEUED,
                                          due=self.clock.now + timedelta(seconds=45 if delayed else 0))

    @rule(limit=st.integers(1, 3))
    def claim(self, limit: int) -> None:
        due = [i for i, e in self.jobs.items()
               if e.status in (Status.QUEUED, Status.SCHEDULED) and e.due is not None and e.due <= self.clock.now]
        claimed = self.store.jobs_claim(queues=[self.queue], limit=limit, worker_id="w", lease_ttl=TTL)
        assert len(claimed) == min(limit, len(due))
        for job in claimed:
            assert job.id in due
            expected = self.jobs[job.id]
            expected.status, expected.attempts = Status.RUNNING, expected.attempts + 1
            expected.lease, expected.expires = job.lease, self.clock.now + TTL

    @rule(seconds=st.sampled_from([1, 20, 40]))
    def time_passes(self, seconds: int) -> None:
        self.clock.advance(timedelta(seconds=seconds))

    def _live(self, expected: Expected) -> bool:
        """A holder's lease is good until it expires, reclaimed or not."""
        return expected.lease is not None and expected.expires is not None and expected.expires > self.clock.now

    @rule()
    def heartbeat(self) -> None:
        running = [e for e in self.jobs.values() if e.status is Status.RUNNING and e.lease is not None]
        held = self.store.leases_extend(leases=[e.lease for e in running if e.lease], lease_ttl=TTL)
        live = [e for e in running if self._live(e)]
        assert held == {e.lease for e in live}  # an expired lease is not its holder's any more
        for expected in live:
            expected.expires = self.clock.now + TTL

    def _ended(self, expected: Expected, item: Finish) -> bool:
        """Whether the store took ``item``: only while the lease lasts."""
        took = applied(self.store.jobs_finish([item]))
        assert took == ({item.lease} if self._live(expected) else set())
        return bool(took)

    @rule()
    def its_worker_dies(self) -> None:
        """The lease runs out and another worker reclaims it."""
        self.time_passes(40)
        self.reclaim()

    @rule()
    def reclaim(self) -> None:
        reclaimed = {i for i in reclaim(self.store) if i in self.jobs}
        expired = {i for i, e in self.jobs.items()
                   if e.status is Status.RUNNING and e.expires is not None and e.expires <= self.clock.now}
        assert reclaimed == expired
        for job_id in expired:
            expected = self.jobs[job_id]
            self._drop_lease(expected)
            if expected.attempts < 3:
                expected.status, expected.due = Status.QUEUED, self.clock.now
            else:
                expected.status = Status.FAILED

    @rule(pick=st.integers(0, 10))
    def complete(self, pick: int) -> None:
        job_id = self._take(Status.RUNNING, pick)
        if job_id is None:
            return
        expected = self.jobs[job_id]
        assert expected.lease is not None
        if not self._ended(expected, Completion(expected.lease, {"n": 1})):
            return
        expected.status = Status.SUCCEEDED
        self._drop_lease(expected)

    @rule(pick=st.integers(0, 10))
    def fail(self, pick: int) -> None:
        job_id = self._take(Status.RUNNING, pick)
        if job_id is None:
            return
        expected = self.jobs[job_id]
        assert expected.lease is not None
        if not self._ended(expected, FailNow(expected.lease, "NOT_FOUND", "gone")):
            return
        expected.status = Status.FAILED
        self._drop_lease(expected)

    @rule(pick=st.integers(0, 10), delay=st.sampled_from([0, 10]))
    def retry(self, pick: int, delay: int) -> None:
        job_id = self._take(Status.RUNNING, pick)
        if job_id is None:
            return
        expected = self.jobs[job_id]
        assert expected.lease is not None
        item = RetryLater(expected.lease, timedelta(seconds=delay), "UPSTREAM_5XX", "busy")
        if not self._ended(expected, item):
            return
        self._drop_lease(expected)
        if expected.cancel_asked:  # a retry that crosses a cancel ends the job
            expected.status = Status.CANCELLED
        else:
            expected.status, expected.due = Status.QUEUED, self.clock.now + timedelta(seconds=delay)

    @rule(pick=st.integers(0, 10))
    def cancel(self, pick: int) -> None:
        if not self.jobs:
            return
        job_id = list(self.jobs)[pick % len(self.jobs)]
        expected = self.jobs[job_id]
        if expected.status in TERMINAL:
            with pytest.raises(IllegalTransition):
                cancel(self.store, job_id, "ops")
            return
        answer = cancel(self.store, job_id, "ops")
        if expected.status is Status.RUNNING:
            assert answer.status is Status.RUNNING
            expected.cancel_asked = True
        else:
            assert answer.status is Status.CANCELLED
            expected.status = Status.CANCELLED

    @rule(pick=st.integers(0, 10))
    def revive(self, pick: int) -> None:
        job_id = self._take(Status.FAILED, pick)
        if job_id is None:
            return
        job = self.store.job_get(job_id=job_id)
        assert job is not None
        (revived,) = self.store.jobs_revive(revivals=[Revival(job_id, revive_plan(job, reason=MANUAL_RETRY, by="ops"))])
        assert revived is not None and revived.status is Status.QUEUED
        expected = self.jobs[job_id]
        expected.status, expected.attempts, expected.due, expected.cancel_asked = \
            Status.QUEUED, 0, self.clock.now, False

    @precondition(lambda self: bool(self.old_leases))
    @rule(pick=st.integers(0, 10))
    def a_stale_write_is_refused(self, pick: int) -> None:
        stale = self.old_leases[pick % len(self.old_leases)]
        assert applied(self.store.jobs_finish([Completion(stale, "late")])) == set()
        assert applied(self.store.jobs_finish([RetryLater(stale, timedelta(0), "X", "late")])) == set()

    # -- what must hold after every step ------------------------------------------

    @invariant()
    def the_store_agrees_with_the_model(self) -> None:
        for job_id, expected in self.jobs.items():
            job = self.store.job_get(job_id=job_id)
            assert job is not None, "a job was lost"
            assert job.status is expected.status, (job_id, job.status, expected)
            assert job.attempts == expected.attempts
            assert (job.lease_token is None) == (expected.status is not Status.RUNNING)
            if expected.lease is not None:
                assert job.lease == expected.lease


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_every_store_follows_the_model(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    def open_store(clock: Clock) -> Store:
        if kind == "memory":
            return MemoryStore(clock=clock)
        if kind == "sqlite":
            return SQLiteStore(str(tmp_path / f"{uuid.uuid4().hex}.db"), clock=clock)
        return PostgresStore(request.getfixturevalue("pg_url"), clock=clock)

    # No shrinking: under a loaded machine a run failed twice in the full suite
    # and its replay diverged (FlakyStrategyDefinition), hiding the failure
    # itself. Unshrunk, the next one shows its real error and steps.
    run_state_machine_as_test(lambda: Lifecycle(open_store),
                              settings=settings(max_examples=100, stateful_step_count=40, deadline=None,
                                                phases=[Phase.explicit, Phase.reuse, Phase.generate]))
