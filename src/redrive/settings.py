"""One settings object: code first, then the environment, then the documented
defaults. Every ``REDRIVE_`` variable redrive reads is a field here, read
through ``Settings.load`` and checked when it is loaded; nothing reads the
environment on its own.

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


def _setting(default: Any, env: str, doc: str, *, alias: str | None = None, secret: bool = False) -> Any:
    """A secret is left out of the settings' repr: a logged ``Settings`` shows none."""
    return field(default=default, repr=not secret, metadata={"env": env, "alias": alias, "doc": doc})


LOG_FORMATS = ("text", "json")
POOL_MODES = ("session", "transaction")
SQLITE_SYNCHRONOUS = ("full", "normal")


MAX_CONCURRENCY = 1000
# A channel's longest wait for an answer: the notification task allows this per channel.
NOTIFY_TIMEOUT_MAX = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str = _setting(
        "sqlite:///redrive.db",
        "REDRIVE_DATABASE_URL",
        "Where jobs live: sqlite:///relative.db, sqlite:////absolute.db, "
        "postgresql://user@host/db or memory://. Default: the file redrive.db here.",
        secret=True,  # it may hold a password
    )
    database_pool_mode: str = _setting(
        "session", "REDRIVE_DATABASE_POOL_MODE",
        "How a pooler in front of PostgreSQL hands out its connections: session "
        "(a direct connection, or PgBouncer in session mode) or transaction (PgBouncer "
        "or a managed pooler in transaction mode: redrive prepares no statements and "
        "listens for wake-ups only at REDRIVE_LISTEN_URL; docs/storage.md). Default session.",
    )
    listen_url: str = _setting(
        "", "REDRIVE_LISTEN_URL",
        "A direct (or session-mode) PostgreSQL URL for LISTEN when REDRIVE_DATABASE_URL "
        "goes through a transaction-mode pooler; without it workers find new jobs by "
        "polling (REDRIVE_WORKER_POLL_INTERVAL). Default: none.",
        secret=True,  # it may hold a password
    )
    sqlite_synchronous: str = _setting(
        "full", "REDRIVE_SQLITE_SYNCHRONOUS",
        "How SQLite commits: full (every commit reaches the disk before it returns: a "
        "committed job survives a power cut) or normal (the log reaches the disk at each "
        "checkpoint: a crash of the process loses nothing, a power cut or an OS crash may "
        "lose the last commits; faster). docs/storage.md. Default full.",
    )
    store_timeout: timedelta = _setting(
        timedelta(seconds=10),
        "REDRIVE_STORE_TIMEOUT",
        "How long one call to PostgreSQL may take before redrive gives up on it "
        "and drops its connection (a partition would otherwise hold it for "
        "minutes): an enqueue past it fails with STORE_TIMEOUT, its outcome "
        "unknown. A worker uses at most half its lease TTL (never under 1 s). Default 10 s.",
    )
    worker_concurrency: int = _setting(
        10, "REDRIVE_WORKER_CONCURRENCY",
        "Jobs one worker process runs at once, and the most one claim takes. "
        "Many short async jobs go faster with hundreds (the bench uses 500). Default 10.",
        alias="WORKER_CONCURRENCY",
    )
    worker_processes: int = _setting(
        1, "REDRIVE_WORKER_PROCESSES",
        "Worker processes `redrive worker` runs under one supervisor, each with "
        "its own concurrency (docs/processes.md). Default 1: one process, no supervisor.",
    )
    worker_max_orphans: int = _setting(
        4, "REDRIVE_WORKER_MAX_ORPHANS",
        "Threads of sync runs abandoned past their time limit that one worker "
        "process lets run on (a thread cannot be killed); past it the worker "
        "claims no more sync jobs until one returns. Run `--processes` with "
        "`hard_timeout=` to kill such runs instead (docs/processes.md). Default 4.",
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

    app: str = _setting(
        "", "REDRIVE_APP",
        "The application the CLI loads, as module:attribute (myapp.tasks:app), when a command names none. "
        "Default: none.",
    )
    log_format: str = _setting(
        "text", "REDRIVE_LOG_FORMAT", "How a process logs: text, or json (one object per line). Default text.",
    )
    api_tokens: str = _setting(
        "", "REDRIVE_API_TOKENS",
        "The HTTP API's tokens, comma-separated TOKEN=operator:NAME or TOKEN=owner:NAME (docs/http.md). "
        "Default: none.", secret=True,
    )
    api_tokens_file: str = _setting(
        "", "REDRIVE_API_TOKENS_FILE", "A file of API tokens, one per line, as above. Default: none.",
    )
    api_rate_limit: str = _setting(
        "6000/minute", "REDRIVE_API_RATE_LIMIT",
        "Requests one caller may make to the HTTP API (several joined by ';', or off). Default 6000/minute.",
    )
    dashboard_secret: str = _setting(
        "", "REDRIVE_DASHBOARD_SECRET",
        "Signs the dashboard's session cookies; set it when several processes serve the dashboard. "
        "Default: a random one per process.", secret=True,
    )
    dashboard_url: str = _setting(
        "", "REDRIVE_DASHBOARD_URL", "Where the dashboard is served: links in notifications start here. "
        "Default: none (messages carry no links).",
    )
    slack_webhook_url: str = _setting(
        "", "REDRIVE_SLACK_WEBHOOK_URL", "A Slack incoming webhook: set, it sends notifications. Default: none.",
        secret=True,
    )
    smtp_host: str = _setting(
        "", "REDRIVE_SMTP_HOST", "An SMTP server: set, it sends notifications by email. Default: none.",
    )
    smtp_port: int = _setting(587, "REDRIVE_SMTP_PORT", "The SMTP server's port. Default 587.")
    smtp_starttls: bool = _setting(
        True, "REDRIVE_SMTP_STARTTLS", "Whether SMTP upgrades to TLS (false for a local relay). Default true.",
    )
    smtp_user: str = _setting("", "REDRIVE_SMTP_USER", "A login for the SMTP server. Default: none.")
    smtp_password: str = _setting(
        "", "REDRIVE_SMTP_PASSWORD", "Its password. Default: none.", secret=True,
    )
    email_from: str = _setting("", "REDRIVE_EMAIL_FROM", "The sender of notification emails. Default: none.")
    email_to: str = _setting(
        "", "REDRIVE_EMAIL_TO", "Who gets notification emails, comma-separated. Default: none.",
    )
    notify_window: timedelta = _setting(
        timedelta(minutes=1), "REDRIVE_NOTIFY_WINDOW",
        "How long failures of one task are gathered into one notification. Default 60 s.",
    )
    notify_retry_for: timedelta = _setting(
        timedelta(hours=6), "REDRIVE_NOTIFY_RETRY_FOR",
        "How long a notification is retried while its channels fail (backoff capped at 5 min). Default 6 h.",
    )
    notify_timeout: timedelta = _setting(
        timedelta(seconds=10), "REDRIVE_NOTIFY_TIMEOUT",
        "How long a channel (Slack, the mail server) may take to answer before the send counts as failed "
        "and is retried; at most 30 s. Default 10 s.",
    )
    sentry_dsn: str = _setting(
        "", "REDRIVE_SENTRY_DSN",
        "Where `redrive worker` reports jobs that fail for good (the sentry extra; "
        "redrive.sentry). Default: none.",
        secret=True,  # the DSN holds the project's key
    )
    alert_interval: timedelta = _setting(
        timedelta(seconds=15), "REDRIVE_ALERT_INTERVAL", "How often alert rules are checked. Default 15 s.",
    )

    def __post_init__(self) -> None:
        if not 1 <= self.worker_concurrency <= MAX_CONCURRENCY:
            raise ConfigError(f"worker_concurrency must be from 1 to {MAX_CONCURRENCY} (a sync job holds a thread; "
                              "run more worker processes for more)")
        if self.retry_max_attempts < 1:
            raise ConfigError("retry_max_attempts must be at least 1")
        if self.worker_lease_ttl < timedelta(milliseconds=300):
            raise ConfigError("worker_lease_ttl must be at least 0.3 s")
        if isinstance(self.worker_processes, bool) or not isinstance(self.worker_processes, int) \
                or self.worker_processes < 1:
            raise ConfigError(f"worker_processes must be a whole number of at least 1, not {self.worker_processes!r}")
        if isinstance(self.worker_max_orphans, bool) or not isinstance(self.worker_max_orphans, int) \
                or self.worker_max_orphans < 1:
            raise ConfigError(f"worker_max_orphans must be a whole number of at least 1, not {self.worker_max_orphans!r}")
        if self.store_timeout <= timedelta(0):
            raise ConfigError("store_timeout must be longer than zero")
        if self.worker_shutdown_grace < timedelta(0):
            raise ConfigError("worker_shutdown_grace cannot be negative")
        if self.worker_poll_interval <= timedelta(0):
            raise ConfigError("worker_poll_interval must be positive")
        if self.job_retention < timedelta(0):
            raise ConfigError("job_retention cannot be negative")
        if not self.database_url:
            raise ConfigError("database_url is empty")
        if self.database_pool_mode not in POOL_MODES:
            raise ConfigError(f"database_pool_mode is session or transaction, not {self.database_pool_mode!r}")
        if self.sqlite_synchronous not in SQLITE_SYNCHRONOUS:
            raise ConfigError(f"sqlite_synchronous is full or normal, not {self.sqlite_synchronous!r}")
        if self.listen_url and not self.listen_url.startswith(("postgresql://", "postgres://")):
            raise ConfigError("listen_url must be a postgresql:// URL (LISTEN is PostgreSQL's)")
        if self.log_format not in LOG_FORMATS:
            raise ConfigError(f"log_format is text or json, not {self.log_format!r}")
        if not 0 < self.smtp_port < 65536:
            raise ConfigError(f"smtp_port must be a port number, not {self.smtp_port}")
        if self.notify_window <= timedelta(0):
            raise ConfigError("notify_window must be positive")
        if self.alert_interval <= timedelta(0):
            raise ConfigError("alert_interval must be positive")
        if self.notify_retry_for <= timedelta(0):
            raise ConfigError("notify_retry_for must be positive")
        if not timedelta(0) < self.notify_timeout <= NOTIFY_TIMEOUT_MAX:
            raise ConfigError(f"notify_timeout must be more than 0 s and at most {NOTIFY_TIMEOUT_MAX.seconds} s")

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


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _parse(env: str, raw: str, default: Any) -> Any:
    if isinstance(default, bool):
        if raw.strip().lower() in _TRUE + _FALSE:
            return raw.strip().lower() in _TRUE
        raise ConfigError(f"{env}={raw!r} is not true or false")
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
