"""Every knob, read from the environment, with its default and a one-line
error for a bad value."""

from __future__ import annotations

import os
from dataclasses import dataclass

from redrive import ConfigError


@dataclass(frozen=True)
class Settings:
    database_url: str = "sqlite:///matchmaking.db"
    offers_per_day: int = 3  # DAILY_OFFER_COUNT
    send_at: str = "0 9 * * *"  # 09:00 local, in every time zone that has users
    retry_delays_s: tuple[float, ...] = (30.0, 120.0, 300.0)  # transient failures; logic errors: none
    worker_concurrency: int = 8
    db_lock_timeout_ms: int = 5000  # a lock waited on longer is a transient database error (retried)
    log_level: str = "info"  # the worker's JSON log lines: info has a line per job; warning only trouble

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        found: dict[str, object] = {}
        if text := env.get("DATABASE_URL", "").strip():
            found["database_url"] = text
        if text := env.get("SEND_AT", "").strip():
            found["send_at"] = text
        if text := env.get("LOG_LEVEL", "").strip().lower():
            if text not in ("debug", "info", "warning", "error"):
                raise ConfigError(f"LOG_LEVEL is debug, info, warning or error, not {text!r}")
            found["log_level"] = text
        for name in ("offers_per_day", "worker_concurrency", "db_lock_timeout_ms"):
            if text := env.get(name.upper(), "").strip():
                if not text.isdigit() or int(text) < 1:
                    raise ConfigError(f"{name.upper()} must be a whole number of at least 1, not {text!r}")
                found[name] = int(text)
        if text := env.get("RETRY_DELAYS_S", "").strip():
            try:
                delays = tuple(float(part) for part in text.split(","))
            except ValueError:
                raise ConfigError(f"RETRY_DELAYS_S is a comma-separated list of seconds, not {text!r}") from None
            if any(d < 0 for d in delays):
                raise ConfigError("RETRY_DELAYS_S cannot hold a negative delay")
            found["retry_delays_s"] = delays
        return cls(**found)  # type: ignore[arg-type]
