"""Durations as people write them: ``90``, ``90s``, ``15m``, ``12h``, ``7d``
(a bare number is seconds). One parser for the command line and the
environment, so ``--retention 7d`` and ``REDRIVE_JOB_RETENTION=7d`` agree."""

from __future__ import annotations

import math
from datetime import timedelta

from redrive.errors import ConfigError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
LONGEST = timedelta(days=3650)  # beyond this a duration is a typo, not a plan


def parse_duration(text: str) -> timedelta:
    """A duration from text, or ``ConfigError`` naming what was wrong."""
    raw = text.strip().lower()
    number, unit = (raw[:-1], raw[-1]) if raw[-1:] in _UNITS else (raw, "s")
    try:
        seconds = float(number) * _UNITS[unit]
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or abs(seconds) > LONGEST.total_seconds():
        raise ConfigError(f"{text!r} is not a duration (seconds, or a number with s, m, h or d, such as 30s or 7d)")
    return timedelta(seconds=seconds)
