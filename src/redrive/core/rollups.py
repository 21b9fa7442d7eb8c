"""Rollups: how many attempts ended each minute, per queue and task, and how
long they ran and waited, kept apart from the jobs so charts never scan
history and outlive its pruning.

The store adds to them in the same transaction that records each ending
(exact counts, no second pass). A row counts one ``kind`` of ending
(succeeded, failed for good, retried, cancelled while running) in one
duration bucket, or (kind ``wait``) one queue-wait bucket: percentiles come
from merged bucket counts, as Prometheus histograms give them, so they are
estimates within a bucket's width. Rows start a minute apart; after a day
they are folded into hours, after ``KEEP`` they go. See docs/dashboard.md.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from redrive.core.transitions import Finish, Finished, Requeue, RetryLater
from redrive.errors import ConfigError

# Upper bounds, in ms, of the duration and wait buckets: bucket i holds values
# up to BOUNDS_MS[i]; the last one everything longer.
BOUNDS_MS = (5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 1_800_000,
             math.inf)
UNTIMED = -1  # an ending no run timed (a crashed worker's job, taken back)
ENDINGS = ("succeeded", "failed", "retried", "cancelled")
WAIT = "wait"

# Rows of the last MINUTES_FOR stay a minute wide (what the 1-hour chart reads),
# older ones are folded into hours (so a 7-day chart reads 168 rows per queue,
# task and bucket, not 10,080), and those older than KEEP go.
MINUTES_FOR = timedelta(hours=2)
KEEP = timedelta(days=35)
# PostgreSQL writes each connection's endings to one of a few shards so two
# workers never wait on the same row; after SHARDS_FOR they are added together.
SHARDS_FOR = timedelta(minutes=10)


def rollup_folds(now: datetime) -> list[tuple[str, int, int]]:
    """The compaction's steps at ``now``, in order, as (query, before, grain):
    rows older than ``before`` (seconds since the epoch) folded into rows
    ``grain`` seconds wide (``rollups_fold``), or dropped (``rollups_forget``)."""
    at = int(now.timestamp())
    return [("rollups_fold", at - int(SHARDS_FOR.total_seconds()), 60),
            ("rollups_fold", at - int(MINUTES_FOR.total_seconds()), 3600),
            ("rollups_forget", at - int(KEEP.total_seconds()), 0)]


def rollup_range(since: datetime, slot: timedelta, by: str, timed: bool) -> dict[str, Any]:
    """``rollups_read``'s parameters: from ``since`` (a whole second), in
    slots of ``slot`` (whole minutes: rows start a minute apart), per queue
    or per task."""
    grain = int(slot.total_seconds())
    if grain < 60 or grain % 60:
        raise ConfigError(f"a rollup slot is a whole number of minutes, not {slot}")
    if by not in ("queue", "task"):
        raise ConfigError(f"by must be queue or task, not {by[:20]!r}")
    return {"since": math.floor(since.timestamp()), "grain_s": grain, "by": by, "timed": bool(timed)}


def bucket_of(ms: object) -> int:
    """The bucket a duration or a wait of ``ms`` falls in (``UNTIMED`` for
    none, or for anything that is not a number of ms)."""
    if type(ms) is int:  # what a worker writes
        return bisect.bisect_left(BOUNDS_MS, ms if ms > 0 else 0)
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or math.isnan(ms):
        return UNTIMED
    return bisect.bisect_left(BOUNDS_MS, max(ms, 0))


def ending_kind(status: str, retried: bool) -> str | None:
    """How an ending counts: a job moved to ``status``, ``queued`` counting
    only when its attempt was spent (``retried``: a retry, or a lease taken
    back from a crashed worker), not when it was handed back unrun."""
    if status == "queued":
        return "retried" if retried else None
    return status if status in ENDINGS else None


def rollup_tally(written: Iterable[Finished]) -> dict[tuple[str, str, str, int], int]:
    """What the endings a store wrote add to their minute's rollups:
    (queue, task, kind, bucket) -> how many, each run's wait (the worker's
    ``wait_ms``) counted under ``wait``. Every store writes it in the
    transaction of the endings it counts."""
    added: dict[tuple[str, str, str, int], int] = {}
    for done in written:
        kind = ending_kind(done.status.value, type(done.item) is RetryLater or _spent(done.item))
        if kind is None:
            continue
        queue, task, meta = done.queue, done.task, done.item.meta
        duration_ms, wait_ms = meta.get("duration_ms"), meta.get("wait_ms")
        key = (queue, task, kind, bucket_of(duration_ms))
        added[key] = added.get(key, 0) + 1
        if wait_ms is not None:
            key = (queue, task, WAIT, bucket_of(wait_ms))
            added[key] = added.get(key, 0) + 1
    return added


def _spent(item: Finish) -> bool:
    return type(item) is Requeue and not item.refund


def quantile(buckets: dict[int, int], q: float) -> float | None:
    """The ``q`` quantile (0..1) of the values counted in ``buckets``, in ms,
    interpolated within its bucket (the last bucket answers its lower bound);
    None when nothing was timed."""
    timed = sorted((b, n) for b, n in buckets.items() if b != UNTIMED and n > 0)
    total = sum(n for _, n in timed)
    if not total:
        return None
    rank, seen = min(max(q, 0.0), 1.0) * total, 0
    place = 0
    while seen + timed[place][1] < rank:  # stops at the last bucket at the latest: rank <= total
        seen += timed[place][1]
        place += 1
    b, n = timed[place]
    low = 0.0 if b == 0 else float(BOUNDS_MS[b - 1])
    high = BOUNDS_MS[b]
    return low if math.isinf(high) else low + (high - low) * (rank - seen) / n


@dataclass(frozen=True, slots=True)
class Window:
    """What a chart covers: ``slots`` bars of ``slot`` each, ending with the current one."""

    name: str
    slots: int
    slot: timedelta

    def start(self, now: datetime) -> datetime:
        """The first slot's start: slots are aligned to whole multiples of their width."""
        width = self.slot.total_seconds()
        current = datetime.fromtimestamp(now.timestamp() // width * width, tz=now.tzinfo)
        return current - self.slot * (self.slots - 1)


WINDOWS = {w.name: w for w in (Window("1h", 60, timedelta(minutes=1)), Window("24h", 24, timedelta(hours=1)),
                                Window("7d", 28, timedelta(hours=6)))}


def window_named(name: str) -> Window:
    try:
        return WINDOWS[name]
    except KeyError:
        raise ConfigError(f"window must be one of {', '.join(WINDOWS)}, not {name[:20]!r}") from None


@dataclass(slots=True)
class Slot:
    """One bar: the endings in ``[start, start + slot)`` and their buckets."""

    start: datetime
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ENDINGS, 0))
    durations: dict[int, int] = field(default_factory=dict)
    waits: dict[int, int] = field(default_factory=dict)

    def add(self, kind: str, bucket: int, n: int) -> None:
        if kind == WAIT:
            self.waits[bucket] = self.waits.get(bucket, 0) + n
            return
        self.counts[kind] = self.counts.get(kind, 0) + n
        self.durations[bucket] = self.durations.get(bucket, 0) + n


@dataclass(slots=True)
class Series:
    """A queue's or a task's slots over a window, oldest first."""

    key: str
    slots: list[Slot]

    def totals(self) -> dict[str, int]:
        return {kind: sum(s.counts[kind] for s in self.slots) for kind in ENDINGS}

    def merged(self, part: str) -> dict[int, int]:
        out: dict[int, int] = {}
        for s in self.slots:
            for b, n in getattr(s, part).items():
                out[b] = out.get(b, 0) + n
        return out


def series(rows: Iterable[tuple[datetime, str, str, int, int]], window: Window, now: datetime) -> list[Series]:
    """Rollup rows of (at, key, kind, bucket, n) as one series per key (a
    queue or a task), sorted by name; rows outside the window are left out."""
    start = window.start(now)
    width = window.slot.total_seconds()
    found: dict[str, Series] = {}
    for at, key, kind, bucket, n in rows:
        index = int((at - start).total_seconds() // width)
        if not 0 <= index < window.slots:
            continue
        if key not in found:
            found[key] = Series(key, [Slot(start + window.slot * i) for i in range(window.slots)])
        found[key].slots[index].add(kind, bucket, n)
    return [found[key] for key in sorted(found)]
