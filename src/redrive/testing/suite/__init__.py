"""The store conformance suite, one module per concept (as River's driver
tests are): ``from redrive.testing.suite import *`` in a test module brings
every test, and the fixtures the suite defines, into it. The fixtures a
store author provides are listed in ``redrive.testing``'s docstring.

| module | concept |
|---|---|
| ``jobs`` | enqueue, claim, fenced writes, reclaim, the job list |
| ``operations`` | cancels (one, or many in one write), paused queues |
| ``endings`` | every kind of ending, what the store answers it decided, the crossings |
| ``limits`` | concurrency and rates shared through the store |
| ``dead_letters`` | stages, dead letters, escalation, revive plans |
| ``idempotency`` | keys, versions, deterministic ids, content dedupe |
| ``breakers`` | shared breaker state, the claim's side of hold-queue |
| ``outbox_and_schedules`` | outbox rows, schedule checkpoints, the lease check, wake-ups |
| ``reads`` | pages, filters, queue counts, facets |
| ``clock`` | due times, leases and ages on an injected clock |
| ``retention`` | pruning history |
| ``rollups`` | what endings add to the charts' rollups, their compaction |
| ``workers`` | the worker registry |
| ``alerts`` | the endings alert rules read, and which rules fire |
| ``workflows`` | steps waiting on their parents, edges resolved once, policies, blocked steps revived |
| ``progress`` | a running job's latest progress, fenced on its lease, pruned with it |
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from redrive.testing.suite import (
    alerts,
    breakers,
    clock,
    dead_letters,
    endings,
    idempotency,
    jobs,
    limits,
    operations,
    outbox_and_schedules,
    progress,
    reads,
    retention,
    rollups,
    workers,
    workflows,
)

MODULES: tuple[ModuleType, ...] = (
    jobs, operations, endings, limits, dead_letters, idempotency, breakers, outbox_and_schedules, reads, clock,
    retention, rollups, workers, alerts, workflows, progress,
)


def _collect() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for module in MODULES:
        for name, value in vars(module).items():
            is_fixture = type(value).__name__ == "FixtureFunctionDefinition" or hasattr(
                value, "_pytestfixturefunction")
            if name.startswith("test_") or (is_fixture and not name.startswith("_")):
                if name in found and found[name] is not value:
                    raise ImportError(f"two conformance modules define {name}")
                found[name] = value
    return found


globals().update(_collect())
__all__ = sorted(_collect())
