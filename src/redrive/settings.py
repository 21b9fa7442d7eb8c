"""One settings object: code first, then the environment, then the documented defaults.

Every setting has a ``REDRIVE_`` environment name; the converter's names
(``WORKER_CONCURRENCY``, ``RETRY_MAX_ATTEMPTS``, ...) still work as aliases,
and the ``REDRIVE_`` name wins when both are set. Durations take seconds or a
unit: ``30s``, ``15m``, ``12h``, ``7d``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from typing import Any

from redrive.core.durations import parse_duration
from redrive.errors import ConfigError


def _setting(default: Any, env: str, doc: str, *, alias: str | None = None) -> Any:
    return field(default=default, metadata={"env": env, "alias": alias, "doc": doc})


MAX_CONCURRENCY = 1000


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str = _setting(
        "sqlite:///redrive.db",
        "REDRIVE_DATABASE_URL",
        "Where jobs live: sqlite:///relative.db, sqlite:////absolute.db, "
        "postgresql://user@host/db or memory://. Default: the file redrive.db here.",
    )
    worker_concurrency: int = _setting(
        10, "REDRIVE_WORKER_CONCURRENCY",
        "Jobs one worker process runs at once, and the most one claim takes. "
        "Many short async jobs go faster with hundreds (the bench uses 500). Default 10.",
        alias="WORKER_CONCURRENCY",
    )
    worker_lease_ttl: timedelta = _setting(
        timedelta(seconds=30),
        "REDRIVE_WORKER_LEASE_TTL",
        "How long a claim lasts without a heartbeat; heartbeats run every third "
        "of it. Default 30 s.",
        alias="WORKER_LEASE_TTL_SEC",
    )
    worker_shutdown_grace: timedelta = _setting(
        timedelta(seconds=30),
        "REDRIVE_WORKER_SHUTDOWN_GRACE",
        "On SIGTERM, how long in-flight jobs may still run before they are "
        "requeued. Default 30 s.",
        alias="WORKER_SHUTDOWN_GRACE_SEC",
    )
    worker_poll_interval: timedelta = _setting(
        timedelta(seconds=1),
        "REDRIVE_WORKER_POLL_INTERVAL",
        "How often an idle worker looks for due jobs when no wake-up arrives. "
        "Default 1 s.",
        alias="WORKER_POLL_INTERVAL_SEC",
    )
    job_retention: timedelta = _setting(
        timedelta(0),
        "REDRIVE_JOB_RETENTION",
        "How long a finished job stays queryable: workers prune older history "
        "(and `redrive prune` uses it). Default 0: history is kept forever.",
        alias="JOB_RETENTION_SEC",
    )
    retry_max_attempts: int = _setting(
        3,
        "REDRIVE_RETRY_MAX_ATTEMPTS",
        "Dispatches a job gets, the first included, unless its task says "
        "otherwise. Default 3.",
        alias="RETRY_MAX_ATTEMPTS",
    )

    def __post_init__(self) -> None:
        if not 1 <= self.worker_concurrency <= MAX_CONCURRENCY:
            raise ConfigError(f"worker_concurrency must be from 1 to {MAX_CONCURRENCY} (a sync job holds a thread; "
                              "run more worker processes for more)")
        if self.retry_max_attempts < 1:
            raise ConfigError("retry_max_attempts must be at least 1")
        if self.worker_lease_ttl < timedelta(milliseconds=300):
            raise ConfigError("worker_lease_ttl must be at least 0.3 s")
        if self.worker_shutdown_grace < timedelta(0):
            raise ConfigError("worker_shutdown_grace cannot be negative")
        if self.worker_poll_interval <= timedelta(0):
            raise ConfigError("worker_poll_interval must be positive")
        if self.job_retention < timedelta(0):
            raise ConfigError("job_retention cannot be negative")
        if not self.database_url:
            raise ConfigError("database_url is empty")

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, **in_code: Any) -> Settings:
        """Values given in code win; the environment fills what code left out."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            named = [n for n in (f.metadata["env"], f.metadata["alias"]) if n and n in environ]
            if in_code.get(f.name) is not None:
                values[f.name] = in_code.pop(f.name)
            elif named:
                values[f.name] = _parse(named[0], environ[named[0]], f.default)
        unknown = sorted(k for k, v in in_code.items() if v is not None)
        if unknown:
            raise ConfigError(f"unknown setting: {', '.join(unknown)}")
        return cls(**values)

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def _parse(env: str, raw: str, default: Any) -> Any:
    if isinstance(default, timedelta):
        try:
            return parse_duration(raw)
        except ConfigError as exc:
            raise ConfigError(f"{env}: {exc}") from None
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{env}={raw!r} is not a whole number") from None
    return raw
