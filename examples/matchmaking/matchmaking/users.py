"""Users to match: ``add`` for sign-ups, ``spread`` for a demo population
over many time zones (half-hour and 45-minute offsets, DST gaps at midnight
included)."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Sequence

from matchmaking.db import Db

# Zones with a 30- or 45-minute offset, zones whose clocks jump at midnight,
# both hemispheres' DST, and the date line's two sides.
ZONES = (
    "UTC", "Europe/London", "Europe/Berlin", "Europe/Helsinki", "Europe/Moscow", "Africa/Cairo", "Asia/Beirut",
    "Asia/Tehran", "Asia/Kabul", "Asia/Kolkata", "Asia/Kathmandu", "Asia/Yangon", "Asia/Shanghai", "Asia/Tokyo",
    "Australia/Eucla", "Australia/Adelaide", "Australia/Darwin", "Australia/Lord_Howe", "Australia/Sydney",
    "Pacific/Chatham", "Pacific/Auckland", "Pacific/Kiritimati", "Pacific/Marquesas", "Pacific/Pago_Pago",
    "America/St_Johns", "America/Havana", "America/Santiago", "America/Asuncion", "America/Sao_Paulo",
    "America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles", "America/Anchorage",
    "Atlantic/Azores", "Asia/Colombo",
)
INTERESTS = ("hiking", "jazz", "chess", "cooking", "film", "running", "poetry", "travel", "climbing", "gardening")


def add(db: Db, users: Sequence[tuple[str, str, str, list[str]]]) -> None:
    """(id, time zone, joined on, interests)"""
    db.many("INSERT INTO users (id, timezone, joined_on, interests) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING", [(u, tz, joined, json.dumps(sorted(i))) for u, tz, joined, i in users])


def spread(db: Db, count: int, *, zones: Sequence[str] = ZONES, joined_on: str = "2020-01-01", seed: int = 1) -> list[str]:
    """``count`` users, round-robin over ``zones``, with deterministic ids and interests."""
    rng = random.Random(seed)
    made = [(str(uuid.UUID(int=rng.getrandbits(128), version=4)), zones[n % len(zones)], joined_on,
             rng.sample(INTERESTS, 3)) for n in range(count)]
    for start in range(0, len(made), 1000):
        add(db, made[start:start + 1000])
    return [u[0] for u in made]
