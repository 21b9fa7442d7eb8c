"""How a registered worker is shown: stale once it missed three heartbeats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from redrive.store.port import WORKER_REPORT_INTERVAL_S
from redrive.store.reads import WorkerInfo
from redrive.views import worker_view

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _worker(heartbeat_at: datetime) -> WorkerInfo:
    return WorkerInfo("h:1:abc", "h", 1, ["default"], 4, "1.0", 2, T0, heartbeat_at)


def test_a_worker_is_stale_once_it_missed_three_heartbeats() -> None:
    interval = timedelta(seconds=WORKER_REPORT_INTERVAL_S)
    assert worker_view(_worker(T0), T0 + 3 * interval)["stale"] is False
    late = worker_view(_worker(T0), T0 + 4 * interval)
    assert late["stale"] is True and late["seconds_since_heartbeat"] == 4 * WORKER_REPORT_INTERVAL_S
    assert late["started_at"] == T0.isoformat() and late["running"] == 2
