"""How often one principal may call the API: a moving window per caller
(each principal by name; a caller without a valid token by its address),
kept in this process's memory. Over it, 429 ``RATE_LIMITED`` with a
``Retry-After``. Health checks are not limited.

The limit is ``REDRIVE_API_RATE_LIMIT`` (``6000/minute`` by default; any
``N/second|minute|hour``, several joined by ``;``; ``off`` for none), or
``create_api(rate_limit=...)``. Each server process counts on its own: with
several behind a balancer, a caller gets up to that many times the limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

from limits import RateLimitItem, parse_many, storage, strategies
from starlette.exceptions import HTTPException

from redrive.errors import ConfigError
from redrive.settings import Settings


def rate_limit_from_env(environ: Mapping[str, str] | None = None) -> str:
    return Settings.load(environ).api_rate_limit


class Throttle:
    def __init__(self, rate_limit: str | None) -> None:
        self._items: list[RateLimitItem] = []
        if rate_limit and rate_limit.strip().lower() != "off":
            try:
                self._items = parse_many(rate_limit)
            except ValueError:
                raise ConfigError(f"the API rate limit {rate_limit!r} is not like 6000/minute "
                                  "(or several joined by ';', or off)") from None
        self._limiter = strategies.MovingWindowRateLimiter(storage.MemoryStorage())

    def check(self, caller: str) -> None:
        """Count one request of ``caller``; 429 when it is one too many."""
        for item in self._items:
            if not self._limiter.hit(item, caller):
                reset = self._limiter.get_window_stats(item, caller).reset_time
                wait = max(1, math.ceil(reset - time.time()))
                raise HTTPException(429, f"too many requests: at most {item}; try again in {wait} s",
                                    headers={"Retry-After": str(wait)})
