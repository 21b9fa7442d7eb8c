"""A worker's options, checked once when it is made: its queues and their own
limits, how they are claimed together, its concurrency, lease TTL, grace,
poll interval and retention (each given, or the setting), and the limits
that recycle a supervisor's child."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from redrive.core import checks
from redrive.errors import ConfigError
from redrive.runtime.plugins import Plugin
from redrive.settings import Settings


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    queues: tuple[str, ...]  # the jobs' queues, then the plugins' own
    queue_limits: Mapping[str, int]  # the queues with a limit of their own, the plugins' included
    own: frozenset[str]  # the plugins' own queues: slots beside ``concurrency``
    own_slots: int
    # Claimed together: each limited queue alone, the others as one group.
    groups: tuple[tuple[tuple[str, ...], int | None], ...]
    concurrency: int
    lease_ttl: timedelta
    shutdown_grace: timedelta
    poll_interval: timedelta
    retention: timedelta
    max_orphans: int
    max_jobs: int | None  # claim no more after this many (a supervisor's child, recycled)
    max_memory: int | None  # bytes of resident memory past which it claims no more

    @classmethod
    def of(cls, settings: Settings, *, queues: Sequence[str] | Mapping[str, int | None], concurrency: int | None,
           lease_ttl: timedelta | None, shutdown_grace: timedelta | None, poll_interval: timedelta | None,
           retention: timedelta | None, plugins: Sequence[Plugin], max_jobs: int | None,
           max_memory: int | None) -> WorkerOptions:
        """What ``Worker(...)`` was given, over ``settings``; a one-line
        ``ConfigError`` for anything out of bounds."""
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
        chosen = settings.with_(worker_concurrency=concurrency, worker_lease_ttl=lease_ttl,
                                worker_shutdown_grace=shutdown_grace, worker_poll_interval=poll_interval,
                                job_retention=retention)
        limited = {q: limit for q, limit in limits.items() if limit is not None}
        shared = tuple(q for q in limits if q not in limited)
        groups = tuple(((q,), n) for q, n in limited.items()) + (((shared, None),) if shared else ())
        return cls(tuple(limits), limited, frozenset(own), sum(own.values()), groups, chosen.worker_concurrency,
                   chosen.worker_lease_ttl, chosen.worker_shutdown_grace, chosen.worker_poll_interval,
                   chosen.job_retention, chosen.worker_max_orphans, max_jobs, max_memory)
