"""Deterministic offer generation: the same pool gives the same offers.

The pool of a user on a date is the ``POOL`` users after them in id order
(wrapping around), among those who had joined by that date: a query that
reads the same rows however often, and whenever, it runs. Each candidate is
scored by a versioned algorithm (``ALGORITHM``; a new scoring is a new
version, recorded with each offer), the best ``count`` are offered, ties
broken by id, and each offer's id is the UUIDv5 of ``date:user:candidate``.
Times derive from the firing and the user's time zone, never from the clock.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from matchmaking.db import Db

NAMESPACE = uuid.UUID("6f1c2d4e-9a3b-5c7d-8e0f-1a2b3c4d5e6f")
ALGORITHM = "affinity-v2"
POOL = 50


def offer_id(day: str, user_id: str, candidate_id: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{day}:{user_id}:{candidate_id}"))


def score(user_interests: set[str], candidate_id: str, candidate_interests: set[str], user_id: str) -> float:
    """affinity-v2: shared interests, then a stable per-pair tie-breaker in [0, 1)."""
    pair = ":".join(sorted((user_id, candidate_id)))
    tie = int(hashlib.sha256(f"{ALGORITHM}:{pair}".encode()).hexdigest()[:8], 16) / 2**32
    return round(len(user_interests & candidate_interests) + tie, 6)


def pool(db: Db, user_id: str, day: str) -> list[dict[str, Any]]:
    after = db.rows("SELECT id, interests FROM users WHERE id > %s AND joined_on <= %s ORDER BY id LIMIT %s",
                    user_id, day, POOL)
    if len(after) < POOL:  # wrap around to the first users
        after += db.rows("SELECT id, interests FROM users WHERE id < %s AND joined_on <= %s ORDER BY id LIMIT %s",
                         user_id, day, POOL - len(after))
    return after


def expiry(offered: datetime, timezone: str) -> datetime:
    """The same wall-clock time the next local day (23, 24 or 25 hours later around DST)."""
    zone = ZoneInfo(timezone)
    local = offered.astimezone(zone)
    return datetime.combine(local.date() + timedelta(days=1), local.time(), zone).astimezone(UTC)


def compute(db: Db, day: str, timezone: str, user: dict[str, Any], count: int, offered: datetime) -> list[dict[str, Any]]:
    """The offers of ``user`` for the local ``day``, whose firing was at ``offered``."""
    mine = set(json.loads(user["interests"]))
    scored = sorted(((score(mine, c["id"], set(json.loads(c["interests"])), user["id"]), c["id"])
                     for c in pool(db, user["id"], day)), key=lambda pair: (-pair[0], pair[1]))
    expires = expiry(offered, timezone)
    return [{"id": offer_id(day, user["id"], candidate), "candidate_id": candidate, "score": value,
             "algorithm": ALGORITHM, "offered_at": offered.astimezone(UTC).isoformat(),
             "expires_at": expires.isoformat()}
            for value, candidate in scored[:count]]
