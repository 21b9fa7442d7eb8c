"""What a worker does with a job one of whose breakers is not closed: ask
the shared breaker whether it may run (a half-open trial), and if not, hold
it (hold-queue: back to the queue, no attempt spent, due again shortly) or
fail it fast with the dependency's code."""

from __future__ import annotations

import logging
from datetime import timedelta
from random import Random

from redrive.core.job import Job
from redrive.core.outcome import Execution
from redrive.core.stages import Stage
from redrive.core.transitions import Requeue, fail_fast
from redrive.errors import StoreError
from redrive.runtime.breakers import BreakerGate, Refusal
from redrive.runtime.executor import stages_of
from redrive.runtime.shutdown import Stopping

log = logging.getLogger("redrive.worker")

HOLD_DELAY = timedelta(seconds=1)  # a held job is looked at again after this


class Holding(Stopping):
    _gate: BreakerGate
    _rng: Random

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
        await self._requeue([Requeue(job.lease, HOLD_DELAY, meta={"reason": "breaker_open", "dependency": name})])

    def _fail_fast(self, job: Job, refusal: Refusal) -> Execution:
        task = self.registry.tasks.get(job.task)
        # Dependency() refuses a fail-fast declaration without a fail_code.
        assert refusal.dependency.fail_code is not None
        return fail_fast(job, dependency=refusal.dependency.name, fail_code=refusal.dependency.fail_code,
                         stages=stages_of(task, job) if task is not None else (Stage(job.task),),
                         classifier=self.registry.classifier, rng=self._rng,
                         for_good=refusal.dependency.fail_for_good)
