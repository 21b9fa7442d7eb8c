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
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Literal

from redrive.app import App
from redrive.core.redact import redact, redact_text
from redrive.errors import ConfigError
from redrive.events import CATALOGUE, Event

Format = Literal["text", "json"]
FORMATS: tuple[Format, ...] = ("text", "json")

# The job's status each event leaves it in, as seed 003's logs name it.
_STATUS = {
    "job.enqueued": "queued", "job.claimed": "running", "job.succeeded": "succeeded",
    "job.retry_scheduled": "retry", "job.failed": "failed", "job.cancelled": "cancelled",
    "job.held": "held", "job.reclaimed": "queued", "job.retried": "queued", "job.replayed": "queued",
}
_LEVEL = {
    "job.claimed": logging.DEBUG, "job.enqueued": logging.DEBUG,
    "job.failed": logging.WARNING, "job.dead_lettered": logging.WARNING, "job.escalated": logging.WARNING,
    "job.lease_lost": logging.WARNING, "breaker.changed": logging.WARNING,
}
# A lease token is a worker's credential: it is never written anywhere.
_NEVER = frozenset({"lease_token"})

EVENT_LOGGER = "redrive.event"
_OWN: logging.StreamHandler[Any] | None = None  # the handler ``configure`` made


def event_fields(event: Event) -> dict[str, Any]:
    """An event's log fields: its payload, seconds as ``duration_ms``, the
    status it leaves the job in, and the breaker's state where one is known."""
    fields: dict[str, Any] = {"event": event.name}
    for key, value in event.data.items():
        if key in _NEVER:
            continue
        if key == "duration_s":
            fields["duration_ms"] = round(value * 1000, 3)
        else:
            fields[key] = value
    if status := _STATUS.get(event.name):
        fields["status"] = status
    if event.name == "breaker.changed":
        fields["breaker_state"] = event.data["to_state"]
    elif event.name == "job.held":
        fields["breaker_state"] = "open"
    return fields


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
        fields = event_fields(event)
        own = _only_handler(target)
        if own is not None and target.isEnabledFor(level):
            # What the logging module would write, without a record and its
            # handler chain: a worker logs a line per job.
            line = _json_line(event.at, logging.getLevelName(level), target.name, fields["event"], fields)
            own.acquire()
            try:
                own.stream.write(line + own.terminator)
                own.flush()
            finally:
                own.release()
            return
        target.log(level, _Line(fields), extra={"redrive": fields})

    return app.events.subscribe(write, names=wanted)


def _only_handler(target: logging.Logger) -> logging.StreamHandler[Any] | None:
    """``configure``'s JSON handler, when it is the only place an event line
    can go (no other handler or filter on the way), else None."""
    if _OWN is None or not isinstance(_OWN.formatter, JsonFormatter) or _OWN.filters:
        return None
    logger: logging.Logger | None = target
    while logger is not None:
        if logger.filters or (logger.handlers and logger.handlers != [_OWN]) or logger.disabled:
            return None
        if logger.handlers or not logger.propagate:
            return _OWN if logger.handlers == [_OWN] else None
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
_OURS = frozenset({"event", "job_id", "dead_letter_id", "attempt", "duration_ms", "delay_s", "wait_s", "status",
                   "worker", "found", "retryable", "upstream_status", "concurrency", "firings", "created",
                   "duplicates", "breaker_state", "incident", "escalated", "from_state", "to_state", "state"})


@lru_cache(maxsize=8192)
def _redacted(text: str) -> str:
    return redact_text(text)


def _clean(key: str, value: Any) -> Any:
    if key in _OURS:
        return value
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


_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False)


def _json_line(created: float, level: str, logger: str, message: str, fields: Mapping[str, Any] | None,
               error: str | None = None) -> str:
    line: dict[str, Any] = {
        "ts": datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds"),
        "level": level.lower(), "logger": logger, "message": message,
    }
    if fields:
        line.update({key: _clean(key, value) for key, value in fields.items()})
    if error is not None:
        line["error"] = error
    return _ENCODER.encode(line)


def configure(*, level: str = "info", fmt: str = "text") -> None:
    """The process's logging: every record to stderr in ``fmt``, redacted."""
    if fmt not in FORMATS:
        raise ConfigError(f"the log format is text or json, not {fmt!r}")
    global _OWN
    handler = _OWN = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler], force=True)
    # No line shows the caller's file, thread or process: not looking them up
    # makes a record a third cheaper (the logging HOWTO's "Optimization").
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
