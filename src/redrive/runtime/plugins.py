"""What runs beside a worker's claim loop: the reclaim of expired leases,
pruning, schedules, metrics, notifications, alert rules. Each is a
``Plugin``, given to the worker once (``Worker(app.client, plugins=[...])``;
``redrive worker``'s flags build the same list), with one contract
(docs/plugins.md):

- ``run(beside)`` starts on the worker's event loop once the worker runs,
  and is cancelled once the worker has drained (every ending written):
  clean up in a ``finally``. Blocking work goes to a thread of its own
  (``asyncio.to_thread``), never the loop's.
- A plugin that raises stops the worker cleanly, as a failed heartbeat
  does: nothing beside the jobs is left half-running unseen.
- ``queues``: redrive's own queues the plugin needs served (notifications),
  each with the jobs of it that may run at once, in slots of their own,
  besides the worker's ``concurrency``: a webhook that hangs holds none of
  the jobs' slots.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from random import Random
from types import MappingProxyType

from redrive.client import Client
from redrive.runtime.offload import Offload
from redrive.store.port import Store
from redrive.stream import EventStream


@dataclass(frozen=True, slots=True)
class Beside:
    """What a plugin gets from the worker it runs beside."""

    client: Client
    store: Store
    call: Offload  # runs a blocking store call on the worker's database threads
    events: EventStream
    worker_id: str
    lease_ttl: timedelta
    rng: Random
    wake: Callable[[], None]  # tells the claim loop that jobs may be due


class Plugin:
    """Subclass it and write ``run``; ``name`` is shown in logs."""

    name = "plugin"
    queues: Mapping[str, int] = MappingProxyType({})

    async def run(self, beside: Beside) -> None:
        raise NotImplementedError


async def until_cancelled() -> None:
    """For a plugin whose work is on threads of its own: wait here until the worker stops."""
    await asyncio.Event().wait()
