"""Every knob, read from the environment, with its default and a one-line
error for a bad value. The design's durations are the defaults; tests
scale them down, never the logic."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, fields

from redrive import ConfigError


def _seconds(text: str, name: str) -> tuple[float, ...]:
    try:
        found = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"{name} is a comma-separated list of seconds, not {text!r}") from None
    if not found or any(s < 0 for s in found):
        raise ConfigError(f"{name} needs at least one delay, none negative")
    return found


@dataclass(frozen=True)
class Settings:
    database_url: str = "sqlite:///matching.db"  # redrive's jobs and the application's documents, side by side
    llm_url: str = "http://127.0.0.1:8090"
    llm_api_key: str = ""
    llm_model: str = "match-1"
    llm_timeout_s: float = 30.0
    llm_tries: int = 3  # in-process tries of one LLM call
    llm_retry_delays_s: tuple[float, ...] = (2.0, 4.0, 8.0)  # between those tries
    deliveries: int = 3  # queue-level deliveries of a document (SQS's maxReceiveCount)
    redelivery_delays_s: tuple[float, ...] = (300.0, 1800.0)  # after the 1st and 2nd transient failure
    stuck_after_s: float = 600.0  # a document in-progress this long means a crashed worker: the alarm fires
    worker_concurrency: int = 4
    worker_lease_ttl_sec: int = 60  # SQS's visibility timeout while a document is processed
    slack_webhook_url: str = ""  # set: admins are told on Slack
    smtp_host: str = ""  # set (with EMAIL_TO): admins are told by email
    smtp_port: int = 587
    smtp_starttls: bool = True
    smtp_user: str = ""
    smtp_password: str = ""
    email_from: str = "matching@localhost"
    email_to: str = ""  # comma-separated
    admin_url: str = "http://127.0.0.1:8000/admin"  # links in notifications: {ADMIN_URL}/documents/{id}

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        found: dict[str, object] = {}
        for spec in fields(cls):
            name = spec.name.upper()
            text = env.get(name, "").strip()
            if not text:
                continue
            kind: Callable[[str], object] = type(spec.default)
            try:
                if kind is tuple:
                    found[spec.name] = _seconds(text, name)
                elif kind is bool:
                    found[spec.name] = text.lower() not in ("0", "false", "no")
                else:
                    found[spec.name] = kind(text)
            except ValueError:
                raise ConfigError(f"{name} must be a {'whole ' if kind is int else ''}number, not {text!r}") from None
        made = cls(**found)  # type: ignore[arg-type]
        for name in ("llm_tries", "deliveries", "worker_concurrency", "worker_lease_ttl_sec"):
            if getattr(made, name) < 1:
                raise ConfigError(f"{name.upper()} must be at least 1")
        if made.llm_timeout_s <= 0 or made.stuck_after_s <= 0:
            raise ConfigError("LLM_TIMEOUT_S and STUCK_AFTER_S must be above 0")
        return made

    @property
    def recipients(self) -> list[str]:
        return [r.strip() for r in self.email_to.split(",") if r.strip()]
