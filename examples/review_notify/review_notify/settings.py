"""Every knob, read from the environment, with its default and a one-line
error for a bad value."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from redrive import ConfigError


@dataclass(frozen=True)
class Settings:
    database_url: str = "sqlite:///review_notify.db"
    provider_url: str = "http://127.0.0.1:8097"  # the email provider's API
    provider_api_key: str = ""
    sender: str = "reviews@example.com"
    max_attempts: int = 8  # a review job's tries before it goes to the dead letters
    backoff_initial_s: float = 1.0  # exponential backoff with full jitter, transient failures only
    backoff_max_s: float = 60.0
    send_timeout_s: float = 10.0
    worker_concurrency: int = 8
    worker_lease_ttl_sec: int = 30

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        found: dict[str, object] = {}
        for spec in fields(cls):
            text = env.get(spec.name.upper(), "").strip()
            if not text:
                continue
            kind: Callable[[str], Any] = type(spec.default)
            try:
                value = kind(text)
            except ValueError:
                raise ConfigError(f"{spec.name.upper()} must be a number, not {text!r}") from None
            if kind is not str and value <= 0:
                raise ConfigError(f"{spec.name.upper()} must be above 0")
            found[spec.name] = value
        return cls(**found)  # type: ignore[arg-type]
