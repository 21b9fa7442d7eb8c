"""Stored times read back as datetimes, each distinct value built once."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from datetime import datetime
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

_KEPT = 4096  # distinct times remembered; past it the memo starts again


class TimeMemo(Generic[K]):
    """``read`` with its answers kept by their stored form (a float of epoch
    seconds, PostgreSQL's eight bytes). A claim's jobs share most of their
    times (the claim's clock is their start and update, their leases end
    together, a batch was enqueued at one time), and building a datetime
    costs a worker more than looking one up. Datetimes are immutable, so one
    object may serve every job that has that time. Safe across threads: a
    lookup or an insert is one dict operation, and a reset loses only the memo."""

    def __init__(self, read: Callable[[K], datetime]) -> None:
        self._read = read
        self._seen: dict[K, datetime] = {}

    def __call__(self, stored: K) -> datetime:
        try:
            return self._seen[stored]
        except KeyError:
            pass
        value = self._read(stored)
        if len(self._seen) >= _KEPT:
            self._seen = {}
        self._seen[stored] = value
        return value
