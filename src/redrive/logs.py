"""What a redrive process writes to its log: a line per thing that happened
to a job, a breaker, a queue or an outbox row (from the app's event stream),
as text for a terminal or as one JSON object per line for a log pipeline.
Every line, ours or a library's (httpx logs whole URLs), passes through
redaction before it is written.

    configure(level="info", fmt="json")    # what `redrive worker --log-format json` does
    log_events(app)                        # a line per event of the app

A JSON line holds ``ts``, ``level``, ``logger`` and ``message``, and for an
event its fields: ``event``, ``job_id``, ``task``, ``queue``, ``status``,
``attempt``, ``stage``, ``duration_ms``, ``upstream_status``,
``error_code``, ``breaker_state`` and the event's others (docs/observability.md).
"""

from __future__ import annotations

import json
import logging
import math
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import lru_cache, partial
from json.encoder import encode_basestring
from typing import Any, Literal

from redrive.app import App
from redrive.core.redact import redact, redact_text
from redrive.errors import ConfigError
from redrive.events import CATALOGUE, Event

Format = Literal["text", "json"]
FORMATS: tuple[Format, ...] = ("text", "json")

# The job's status each event leaves it in, as the converter's design names it in its logs.
_STATUS = {
    "job.enqueued": "queued", "job.claimed": "running", "job.succeeded": "succeeded",
    "job.retry_scheduled": "retry", "job.failed": "failed", "job.cancelled": "cancelled",
    "job.held": "held", "job.retried": "queued", "job.replayed": "queued",
}
_LEVEL = {
    "job.claimed": logging.DEBUG, "job.enqueued": logging.DEBUG,
    "job.failed": logging.WARNING, "job.dead_lettered": logging.WARNING, "job.escalated": logging.WARNING,
    "job.lease_lost": logging.WARNING, "breaker.changed": logging.WARNING,
    "notification.undelivered": logging.ERROR,
}
# A lease token is a worker's credential: it is never written anywhere.
_NEVER = frozenset({"lease_token"})
_MILLIS = {"duration_s": "duration_ms", "wait_s": "wait_ms"}  # a log reader's unit

EVENT_LOGGER = "redrive.event"
_LEVEL_NAME = {level: logging.getLevelName(level).lower()
               for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR)}


def event_fields(event: Event) -> dict[str, Any]:
    """An event's log fields: its payload, seconds as ``duration_ms``, the
    status it leaves the job in, and the breaker's state where one is known."""
    return _with_event({"event": event.name}, event)


def _with_event(fields: dict[str, Any], event: Event) -> dict[str, Any]:
    for key in event.keys:
        value = getattr(event, key)
        if key in _NEVER:
            continue
        if key in _MILLIS:
            fields[_MILLIS[key]] = None if value is None else round(value * 1000, 3)
        else:
            fields[key] = value
    if status := _STATUS.get(event.name):
        fields["status"] = status
    if event.name == "breaker.changed":
        fields["breaker_state"] = event.to_state  # type: ignore[attr-defined]
    elif event.name == "job.held":
        fields["breaker_state"] = "open"
    return fields


def _event_line(event: Event, level: str, logger: str) -> str:
    """An event's JSON line, as ``JsonFormatter`` would write its record, from
    a template made once per event shape: a worker writes one per job, and the
    JSON encoder over a dict of the fields cost more than twice as much."""
    shape = (event.name, level, logger, event.keys)
    template, plan = _SHAPES.get(shape) or _shape(*shape)
    return template % (_ts(event.at), *[convert(getattr(event, key)) for key, convert in plan])


_Plan = tuple[tuple[str, Callable[[Any], str]], ...]
_SHAPES: dict[tuple[str, str, str, tuple[str, ...]], tuple[str, _Plan]] = {}


def _shape(name: str, level: str, logger: str, keys: tuple[str, ...]) -> tuple[str, _Plan]:
    """The line's text with a ``%s`` for each value (and the time), and how
    each value is found and made JSON."""
    head = (f'"level": "{level}", "logger": {encode_basestring(logger)}, "message": {encode_basestring(name)}, '
            f'"event": {encode_basestring(name)}')
    parts, plan = ['{"ts": "%s", ', head.replace("%", "%%")], []
    for key in keys:
        if key in _NEVER:
            continue
        out = _MILLIS.get(key, key)
        parts.append(f", {encode_basestring(out)}: ".replace("%", "%%") + "%s")
        plan.append((key, partial(_millis, out) if key in _MILLIS else partial(_json_value, out)))
    if status := _STATUS.get(name):
        parts.append(f', "status": "{status}"')
    if name == "breaker.changed":
        parts.append(', "breaker_state": %s')
        plan.append(("to_state", partial(_json_value, "breaker_state")))
    elif name == "job.held":
        parts.append(', "breaker_state": "open"')
    parts.append("}\n")
    _SHAPES[name, level, logger, keys] = found = ("".join(parts), tuple(plan))
    return found


def _millis(key: str, seconds: Any) -> str:
    """Seconds as milliseconds to the microsecond: formatted, not rounded and
    printed, which cost a worker twice as much on two values a job."""
    if type(seconds) is float and math.isfinite(seconds):
        return f"{seconds * 1000:.3f}"
    if seconds is None:  # an ending no run of this process timed (the reclaim's)
        return "null"
    return _json_value(key, round(seconds * 1000, 3))


def _json_value(key: str, value: Any) -> str:
    """``value`` as JSON, redacted unless redrive made it (``_OURS``)."""
    kind = type(value)
    if kind is str:
        if key in _OURS:
            return encode_basestring(value)
        return _redacted_json(value) if len(value) <= 256 else encode_basestring(redact_text(value))
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    return _ENCODER.encode(_clean(key, value))


@lru_cache(maxsize=8192)
def _redacted_json(text: str) -> str:
    return encode_basestring(redact_text(text))


def log_events(app: App, logger: logging.Logger | None = None) -> Callable[[], None]:
    """Log every event of ``app`` at its level; returns the function that
    stops it. Only events whose level the logger writes are subscribed to (at
    ``warning``, a worker builds no payload for its successes)."""
    target = logger or logging.getLogger(EVENT_LOGGER)
    wanted = [name for name in CATALOGUE if target.isEnabledFor(_LEVEL.get(name, logging.INFO))]
    if not wanted:
        return lambda: None

    def write(event: Event) -> None:
        level = _LEVEL.get(event.name, logging.INFO)
        own = _only_handler(target)
        if own is not None and target.isEnabledFor(level):
            # What the logging module would write, without a record and its
            # handler chain, and made later with others: a worker logs a line per job.
            own.add(event, _LEVEL_NAME[level], target.name)
            return
        fields = event_fields(event)
        target.log(level, _Line(fields), extra={"redrive": fields})

    return app.events.subscribe(write, names=wanted)


def _only_handler(target: logging.Logger) -> _Handler | None:
    """``configure``'s JSON handler, when it is the only place an event line
    can go (no other handler or filter on the way), else None. Asked per
    event, since a test or an application may add a handler at any time."""
    own = _OWN
    if own is None or own.filters or not isinstance(own.formatter, JsonFormatter):
        return None
    logger: logging.Logger | None = target
    while logger is not None:
        if logger.filters or logger.disabled:
            return None
        if handlers := logger.handlers:
            return own if len(handlers) == 1 and handlers[0] is own else None
        if not logger.propagate:
            return None
        logger = logger.parent
    return None


class _Line:
    """An event's text line, made only if a text formatter asks for it."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields

    def __str__(self) -> str:
        rest = " ".join(f"{k}={v}" for k, v in self.fields.items() if k != "event" and v is not None)
        return f"{self.fields['event']} {rest}"


# Fields whose values redrive makes itself (ids, counts, times, its own
# words): nothing of a user's can be in them. The others (task and queue
# names, codes, reasons, keys) are redacted, the short ones through a cache:
# a worker logs the same few names thousands of times a second.
_OURS = frozenset({"event", "job_id", "dead_letter_id", "attempt", "duration_ms", "delay_s", "wait_ms", "status",
                   "worker", "found", "retryable", "upstream_status", "concurrency", "firings", "created",
                   "duplicates", "breaker_state", "incident", "escalated", "from_state", "to_state", "state"})


@lru_cache(maxsize=8192)
def _redacted(text: str) -> str:
    return redact_text(text)


def _clean(key: str, value: Any) -> Any:
    return value if key in _OURS else _clean_value(value)


def _clean_value(value: Any) -> Any:
    if isinstance(value, str) and len(value) <= 256:
        return _redacted(value)
    return redact(value)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line. Values are redacted one by one, so a secret
    is cut out without breaking the line's JSON."""

    def format(self, record: logging.LogRecord) -> str:
        fields: Mapping[str, Any] | None = getattr(record, "redrive", None)
        # An event's line says its name; its fields follow as fields.
        message = fields["event"] if fields else redact_text(record.getMessage())
        error = redact_text(self.formatException(record.exc_info)) if record.exc_info else None
        return _json_line(record.created, record.levelname, record.name, message, fields, error)


# Lines hold no cycles: not checking for them halves the encoding's cost.
_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False, check_circular=False)
_second: tuple[int, str] = (-1, "")


def _ts(created: float) -> str:
    """``created`` as ISO 8601 in UTC to the millisecond. The part up to the
    second is made once a second: a worker stamps thousands of lines in each."""
    global _second
    whole = int(created)
    if _second[0] != whole:
        _second = (whole, datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{_second[1]}.{int((created - whole) * 1000):03d}+00:00"


def _json_line(created: float, level: str, logger: str, message: str, fields: Mapping[str, Any] | None,
               error: str | None = None) -> str:
    line: dict[str, Any] = {"ts": _ts(created), "level": level.lower(), "logger": logger, "message": message}
    if fields:
        line.update({key: _clean(key, value) for key, value in fields.items()})
    if error is not None:
        line["error"] = error
    return _ENCODER.encode(line)


class _Handler(logging.StreamHandler):
    """``configure``'s handler. Records are written at once; events (``add``)
    gather and are made into lines and written together, at most ``FLUSH_S``
    later or before the next record, so lines stay in order. Made in a batch,
    a line costs a worker about half what it costs made between two jobs (the
    code and data for it stay in the processor's caches), and the batch is
    one system call (bench/NOTES.md). ``logging.shutdown`` at exit writes what waits;
    a process killed outright loses at most ``FLUSH_S`` of event lines."""

    FLUSH_S = 0.1
    BATCH = 512

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        # (event, level, logger), appended without a lock: a deque's append
        # and popleft are atomic, and only ``_write_pending`` (under the lock) takes.
        self._pending: deque[tuple[Event, str, str]] = deque()
        self._flusher: threading.Thread | None = None
        self._closed = False

    def add(self, event: Event, level: str, logger: str) -> None:
        self._pending.append((event, level, logger))
        if len(self._pending) >= self.BATCH:
            self.flush()
        elif self._flusher is None:
            with self.lock:  # type: ignore[union-attr]
                if self._flusher is None:
                    self._flusher = threading.Thread(target=self._flush_soon, name="redrive-log-flush", daemon=True)
                    self._flusher.start()

    def _flush_soon(self) -> None:
        while not self._closed:
            time.sleep(self.FLUSH_S)
            if self._pending:
                self.flush()

    def _write_pending(self) -> None:
        pending, take = self._pending, self._pending.popleft
        if pending:
            self.stream.write("".join([_event_line(*take()) for _ in range(len(pending))]))

    def emit(self, record: logging.LogRecord) -> None:
        self._write_pending()  # called under the handler's lock
        super().emit(record)

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._write_pending()
            super().flush()

    def close(self) -> None:
        self.flush()
        self._closed = True  # ends the flusher
        super().close()


_OWN: _Handler | None = None  # the handler ``configure`` made


def configure(*, level: str = "info", fmt: str = "text") -> None:
    """The process's logging: every record to stderr in ``fmt``, redacted."""
    if fmt not in FORMATS:
        raise ConfigError(f"the log format is text or json, not {fmt!r}")
    global _OWN
    if _OWN is not None:
        _OWN.flush()
    handler = _OWN = _Handler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler], force=True)
    # No line shows the caller's file, thread or process: not looking them up
    # makes a record a third cheaper (the logging HOWTO's "Optimization").
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
