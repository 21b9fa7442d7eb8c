"""Stored times are read once per distinct value, and the memo stays bounded."""

from __future__ import annotations

from datetime import UTC, datetime

from redrive.store import times
from redrive.store.times import TimeMemo


def test_each_distinct_time_is_built_once_and_equal_to_reading_it() -> None:
    reads: list[float] = []

    def read(value: float) -> datetime:
        reads.append(value)
        return datetime.fromtimestamp(value, UTC)

    memo = TimeMemo(read)
    first = memo(1_700_000_000.25)
    assert memo(1_700_000_000.25) is first  # one object serves every job with that time
    assert memo(1_700_000_001.5) == datetime.fromtimestamp(1_700_000_001.5, UTC)
    assert reads == [1_700_000_000.25, 1_700_000_001.5]


def test_the_memo_starts_again_when_full() -> None:
    memo = TimeMemo(lambda value: datetime.fromtimestamp(value, UTC))
    for n in range(times._KEPT * 3):
        assert memo(float(n)) == datetime.fromtimestamp(float(n), UTC)
    assert len(memo._seen) <= times._KEPT
