"""The event stream: one place where redrive announces what happened.

Metrics, notifiers, structured logs and tests subscribe to an application's
stream (``app.events``) instead of reading log text. The worker, the
scheduler, the outbox sender and the operator API all emit on it. Every
event has a name and a payload whose keys are fixed by ``CATALOGUE`` below;
payloads hold ids, names, codes, counts and durations, never job arguments
or results.

Handlers run synchronously on the thread that emits (the worker's event
loop, a handler thread, a database thread): keep them quick and
thread-safe, and hand slow work to a queue of your own. A handler that
raises is logged and never affects the job.

The stream is per application, not process-wide: two apps in one process
have two streams.

The catalogue, with when each event fires, is ``docs/events.md``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from redrive.errors import ConfigError

log = logging.getLogger("redrive.events")

# The payload keys of each event, exactly: a test holds every emitted event to them.
CATALOGUE: Mapping[str, frozenset[str]] = {
    name: frozenset(keys.split())
    for name, keys in {
        "worker.started": "worker queues concurrency",
        "worker.stopped": "worker",
        "job.enqueued": "job_id task queue",
        "job.claimed": "job_id task queue attempt worker lease_token wait_s",
        "job.succeeded": "job_id task queue attempt duration_s wait_s",
        "job.retry_scheduled": "job_id task queue attempt stage error_code upstream_status delay_s duration_s wait_s",
        "job.failed": "job_id task queue attempt stage error_code upstream_status error_class retryable duration_s "
                      "wait_s",
        "job.dead_lettered": "job_id task queue stage error_class dead_letter_id escalated",
        "job.escalated": "job_id task queue error_class dead_letter_id",
        "job.held": "job_id task queue dependency",
        "job.lease_lost": "job_id task queue lease_token worker",
        "job.reclaimed": "job_id task queue attempt status",
        "job.retried": "job_id task queue by",
        "job.replayed": "job_id task queue by dead_letter_id replay_from",
        "job.cancel_requested": "job_id task queue by",
        "job.cancelled": "job_id task queue by",
        "job.revealed": "job_id task queue by",
        "queue.paused": "queue by",
        "queue.resumed": "queue by",
        "breaker.changed": "name from_state to_state reason",
        "outbox.sent": "job_id task queue key provider_id",
        "outbox.reconciled": "job_id task queue key provider_id found",
        "outbox.unconfirmed": "job_id task queue key",
        "schedule.fired": "schedule firings created duplicates",
        "alert.changed": "rule state detail incident",
    }.items()
}


# Not frozen: a frozen dataclass is made three times slower, and a worker
# makes one a job. Handlers read events; none changes one.
@dataclass(slots=True)
class Event:
    name: str
    data: Mapping[str, Any]
    at: float = field(default_factory=time.time)  # this process's wall clock, epoch seconds


Handler = Callable[[Event], None]


class EventStream:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handlers: tuple[tuple[Handler, frozenset[str] | None], ...] = ()
        # Each event's handlers, in the order they subscribed; an event no
        # handler wants is not here.
        self._routes: dict[str, tuple[Handler, ...]] = {}

    def subscribe(self, handler: Handler, *, names: Iterable[str] | None = None) -> Callable[[], None]:
        """Call ``handler(event)`` for every event (or those ``names``);
        returns the function that unsubscribes it."""
        wanted = None if names is None else frozenset(names)
        if wanted is not None and not wanted <= set(CATALOGUE):
            raise ConfigError(f"no such event: {', '.join(sorted(wanted - set(CATALOGUE)))}")
        entry = (handler, wanted)
        with self._lock:
            self._handlers = (*self._handlers, entry)
            self._routes = self._route()

        def unsubscribe() -> None:
            with self._lock:
                self._handlers = tuple(h for h in self._handlers if h is not entry)
                self._routes = self._route()

        return unsubscribe

    def _route(self) -> dict[str, tuple[Handler, ...]]:
        routes = {name: tuple(h for h, names in self._handlers if names is None or name in names)
                  for name in CATALOGUE}
        return {name: handlers for name, handlers in routes.items() if handlers}

    def wants(self, name: str) -> bool:
        """Whether a handler listens for ``name``: an emitter builds the
        event's payload only then (a worker emits several per job)."""
        return name in self._routes

    @property
    def active(self) -> bool:
        """Whether anyone listens: emitters skip building payloads when nobody does."""
        return bool(self._handlers)

    def emit(self, name: str, /, **data: Any) -> None:
        handlers = self._routes.get(name)  # a snapshot: subscribing meanwhile is safe
        if handlers is None:
            return
        event = Event(name, data)
        for handler in handlers:
            try:
                handler(event)
            except Exception:
                log.exception("an event handler failed on %s; the event is dropped for it", name)
