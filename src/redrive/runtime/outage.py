"""During a database outage each of a worker's services (claims, heartbeats,
pauses and cancels, outcome writes, reclaims) fails about once a second and
says so. The outage is said once, then once a minute while it lasts; the
store says when the database answers again."""

from __future__ import annotations

import logging
import math
import time

from redrive.errors import StoreUnavailable

LOGGERS = ("redrive.worker", "redrive.breakers", "redrive.scheduler")


class OutageLog(logging.Filter):
    def __init__(self, every_s: float = 60.0) -> None:
        super().__init__()
        self._every_s = every_s
        self._last = -math.inf

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if not any(isinstance(arg, StoreUnavailable) for arg in args):
            return True
        now = time.monotonic()
        if now - self._last < self._every_s:
            return False
        self._last = now
        return True

    def attach(self) -> None:
        for name in LOGGERS:
            logging.getLogger(name).addFilter(self)

    def detach(self) -> None:
        for name in LOGGERS:
            logging.getLogger(name).removeFilter(self)
