"""Every knob, read from the environment (the names are the reliability
design's own), with its default and a one-line error for a bad value."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from redrive import ConfigError


@dataclass(frozen=True)
class Settings:
    database_url: str = "sqlite:///converter.db"
    gateway_url: str = "http://127.0.0.1:8081"
    uploads_dir: Path = Path("converter-data/uploads")
    results_dir: Path = Path("converter-data/results")
    retry_max_attempts: int = 3
    retry_base_delay_ms: int = 5000
    retry_jitter_max_ms: int = 5000
    worker_lease_ttl_sec: int = 30
    worker_concurrency: int = 4
    gateway_timeout_ms: int = 30_000
    circuit_window: int = 20  # the last N gateway calls
    circuit_fail_threshold: int = 50  # percent of them failing opens the breaker
    circuit_cooldown_ms: int = 30_000  # open this long before a trial call
    circuit_mode: str = "hold"  # hold: jobs wait queued; fail_fast: they fail with GW_5XX
    retention_hours: float = 24.0 * 7  # sources and results older than this are removed (0.5: half an hour)
    max_upload_mb: int = 50
    log_format: str = "json"  # the worker's log lines: json (one object a line) or text
    metrics_port: int = -1  # the worker's Prometheus metrics: -1 none, 0 any free port (its log says which)
    demo_session: str = ""  # the demo only: a browser without a session joins this one, to watch the demo's jobs

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        found: dict[str, object] = {}
        for name, default in cls.__dataclass_fields__.items():
            text = env.get(name.upper())
            if text is None or text == "":
                continue
            kind: Callable[[str], object] = type(getattr(cls, name, default.default))
            try:
                found[name] = kind(text)
            except ValueError:
                raise ConfigError(f"{name.upper()} must be {_KINDS.get(kind, 'a value')}, not {text!r}") from None
        made = cls(**found)  # type: ignore[arg-type]
        made.check()
        return made

    def check(self) -> None:
        for name in ("retry_max_attempts", "worker_lease_ttl_sec", "worker_concurrency", "gateway_timeout_ms",
                     "circuit_window", "circuit_cooldown_ms", "max_upload_mb"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name.upper()} must be at least 1, not {getattr(self, name)}")
        for name in ("retry_base_delay_ms", "retry_jitter_max_ms"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name.upper()} cannot be negative")
        if not 0 < self.circuit_fail_threshold <= 100:
            raise ConfigError("CIRCUIT_FAIL_THRESHOLD is a percentage, 1 to 100")
        if self.circuit_mode not in ("hold", "fail_fast"):
            raise ConfigError(f"CIRCUIT_MODE is hold or fail_fast, not {self.circuit_mode!r}")
        if self.log_format not in ("json", "text"):
            raise ConfigError(f"LOG_FORMAT is json or text, not {self.log_format!r}")
        if self.retention_hours <= 0:
            raise ConfigError("RETENTION_HOURS must be above 0")


_KINDS: dict[object, str] = {int: "a whole number", float: "a number", Path: "a path", str: "text"}
