"""Every knob, read from the environment, with its default and a one-line
error for a bad value; §8.2 and §8.3's numbers are the defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from redrive import ConfigError

_NUMBERS = ("attempts_per_stage", "backoff_initial_s", "backoff_multiplier", "backoff_max_s", "call_timeout_s",
            "worker_concurrency")


@dataclass(frozen=True)
class Settings:
    database_url: str = "sqlite:///criticizer.db"
    source_url: str = "http://127.0.0.1:8095"
    source_token: str = ""
    llm_url: str = "http://127.0.0.1:8095"
    llm_api_key: str = ""
    llm_model: str = "critic-1"
    webhook_url: str = "http://127.0.0.1:8095/hooks"
    webhook_token: str = ""
    attempts_per_stage: int = 5  # §8.3, the first attempt included
    backoff_initial_s: float = 1.0  # §8.2: full jitter, random(0, min(max, initial · multiplier^(n-1)))
    backoff_multiplier: float = 2.0
    backoff_max_s: float = 60.0
    call_timeout_s: float = 30.0
    worker_concurrency: int = 4
    snapshots_dir: Path = Path("criticizer-data/snapshots")  # fetched changes, by hash (snapshots.py)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        found: dict[str, object] = {}
        for name in cls.__dataclass_fields__:
            text = env.get(name.upper(), "").strip()
            if not text:
                continue
            if name in _NUMBERS:
                kind = int if name in ("attempts_per_stage", "worker_concurrency") else float
                try:
                    value: object = kind(text)
                except ValueError:
                    raise ConfigError(f"{name.upper()} must be a number, not {text!r}") from None
                if value <= 0:  # type: ignore[operator]
                    raise ConfigError(f"{name.upper()} must be above 0")
                found[name] = value
            else:
                found[name] = Path(text) if name == "snapshots_dir" else text
        return cls(**found)  # type: ignore[arg-type]
