"""Dying at a named point of the store's work: SIGKILL in a store method,
before it or once it answered (tests/apps/crashing.py,
tests/apps/workflow_crashing.py)."""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Callable
from typing import Any

from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SQLiteStore


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def crash(method: str, *, before: bool = False, kind: type | None = None) -> None:
    """Die in ``method``, before it or once it answered something; with
    ``kind``, only when an ending of that kind is in the batch."""
    for store in (SQLiteStore, PostgresStore):
        real: Callable[..., Any] = getattr(store, method)

        @functools.wraps(real)
        def wrapped(self: Any, *args: Any, _real: Callable[..., Any] = real, **kwargs: Any) -> Any:
            ours = kind is None or any(isinstance(item, kind) for item in args[0])
            if before and ours:
                die()
            answer = _real(self, *args, **kwargs)
            if answer and ours:  # only where there was something to lose
                die()
            return answer

        setattr(store, method, wrapped)


