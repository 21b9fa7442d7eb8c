"""The stream an application's events travel on (``app.events``): handlers
subscribe by event name or class (the catalogue of ``redrive.events``), and
each event is told to the handlers that want it, on the emitting thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from redrive.errors import ConfigError
from redrive.events import CATALOGUE, EVENTS, Event

log = logging.getLogger("redrive.events")


Handler = Callable[[Any], None]


class EventStream:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handlers: tuple[tuple[Handler, frozenset[str] | None], ...] = ()
        # Each event's handlers, in the order they subscribed; an event no
        # handler wants is not here.
        self._routes: dict[str, tuple[Handler, ...]] = {}

    def subscribe(self, handler: Handler, *, names: Iterable[str | type[Event]] | None = None) -> Callable[[], None]:
        """Call ``handler(event)`` for every event, or those ``names`` (event
        names or classes: ``names=[JobFailed]``); returns the function that
        unsubscribes it."""
        wanted = None if names is None else frozenset(n if isinstance(n, str) else n.name for n in names)
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

    def emit(self, event: Event | str, /, **data: Any) -> None:
        """Tell ``event`` (an ``Event``, or a catalogue name and its payload)
        to the handlers that want it."""
        name = event if isinstance(event, str) else event.name
        handlers = self._routes.get(name)  # a snapshot: subscribing meanwhile is safe
        if handlers is None:
            return
        if isinstance(event, str):
            event = EVENTS[name](**data)
        for handler in handlers:
            try:
                handler(event)
            except Exception:
                log.exception("an event handler failed on %s; the event is dropped for it", name)
