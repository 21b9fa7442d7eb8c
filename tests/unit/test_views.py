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


def test_the_views_built_from_columns_have_exactly_their_shapes_keys() -> None:
    """A view built from a record's columns shows each column once and no
    more: the shape (and the API model derived from it) names them all."""
    from redrive.core.job import DEAD_LETTER_COLUMNS, EVENT_COLUMNS, JOB_COLUMNS
    from redrive.views import shapes

    assert set(shapes.JobShape.__annotations__) == set(JOB_COLUMNS) - {"lease_token"}
    assert set(shapes.EventShape.__annotations__) == set(EVENT_COLUMNS)
    assert set(shapes.DeadLetterShape.__annotations__) == {*DEAD_LETTER_COLUMNS, "state"}


def test_a_supervisor_and_its_worker_processes_are_shown_with_every_field_their_shape_names() -> None:
    from redrive.views import shapes

    child = WorkerInfo("h:1:abc.1", "h", 2, ["default"], 4, "1.0", 1, T0, T0, jobs_run=7, memory_bytes=1 << 20,
                       orphaned=1, supervisor="h:1")
    supervisor = WorkerInfo("h:1", "h", 1, ["default"], 0, "1.0", 0, T0, T0, children=1, restarts=2,
                            replaced=[{"pid": 9, "worker": "h:1:abc.0", "why": "recycled", "at": T0.isoformat()},
                                      {"pid": 8}])  # (an entry of another version, with less in it)
    shown = [worker_view(w, T0) for w in (child, supervisor)]
    for view in shown:
        assert set(view) == set(shapes.WorkerShape.__annotations__)
    assert (shown[0]["kind"], shown[0]["orphaned"], shown[0]["supervisor"]) == ("worker", 1, "h:1")
    assert (shown[1]["kind"], shown[1]["children"], shown[1]["restarts"]) == ("supervisor", 1, 2)
    assert shown[1]["replaced"][1] == {"pid": 8, "worker": "", "why": "", "reason": "", "at": None}
