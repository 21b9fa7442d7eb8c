"""The benchmark's report: each repeat's figure is shown beside the
median, with the place the system had in that repeat, and no paragraph
splits the targets' table."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from bench.__main__ import PROFILES, Cells
from bench.report import Report


def _report(table: dict[str, Cells], backlog: dict[str, float] | None = None,
            dashboard: dict[str, float] | None = None, repeats: int = 3) -> str:
    names = {short: SimpleNamespace(name=name) for short, name in
             (("redrive-pg", "redrive-pg"), ("pgqueuer", "PgQueuer")) if name in table}
    return Report(profile=PROFILES["quick"], repeats=repeats, table=table, names=names, backlog=backlog,
                  dashboard=dashboard, matchmaking=None, seconds=60, when=datetime(2026, 11, 28, tzinfo=UTC),
                  machine="test").markdown()


def test_each_repeat_is_listed_in_order_with_its_place() -> None:
    redrive, peer = Cells(places=[1, 7, 4]), Cells(places=[4, 1, 7])
    for value in (61_896.0, 50_001.0, 62_000.0):
        redrive.add("enqueue 1000/call", value)
    for value in (59_036.0, 58_000.0, 60_500.0):
        peer.add("enqueue 1000/call", value)
    text = _report({"redrive-pg": redrive, "PgQueuer": peer})
    lines = text.splitlines()
    assert "| redrive-pg | enqueue 1000/call | 61,896 (1st), 50,001 (7th), 62,000 (4th) |" in lines
    assert "| PgQueuer | enqueue 1000/call | 59,036 (4th), 58,000 (1st), 60,500 (7th) |" in lines
    # the medians above are unchanged by the listing
    assert any(line.startswith("| redrive-pg | – | 61,896 |") for line in lines)


def test_a_single_repeat_lists_nothing_more() -> None:
    cells = Cells(places=[1])
    cells.add("jobs/s 1 proc", 1000.0)
    for rss in (48.0, 49.0):  # one figure from each of the repeat's two throughput runs
        cells.add("peak RSS MiB", rss)
    assert "Each repeat" not in _report({"redrive-pg": cells}, repeats=1)


def test_the_targets_table_is_not_split_by_the_backlog_paragraph() -> None:
    cells = Cells()
    backlog = {"small jobs/s": 100.0, "big jobs/s": 95.0, "scrape ms at 10,000 finished": 2.0,
               "scrape ms at 1,000,000 finished": 2.5, "RSS MiB at 100000": 48.0, "RSS MiB at 1000000": 49.0}
    dashboard = {"overview ms": 8.0, "first jobs page ms": 7.0, "login page ms": 1.0}
    lines = _report({"redrive-pg": cells}, backlog=backlog, dashboard=dashboard).splitlines()
    start = lines.index("## Targets (ratios within this run)")
    end = next(i for i in range(start + 2, len(lines)) if not lines[i].startswith("|"))
    table = lines[start + 2:end]
    assert any("dashboard overview" in line for line in table), "the dashboard's rows are in the table"
    assert any("worker RSS" in line for line in table)
    assert any(line.startswith("Backlog run") for line in lines[end:])


def test_the_cpu_targets_are_read_against_the_store_alone_as_their_floor() -> None:
    shown = {"redrive-pg": "redrive-pg", "pgqueuer": "PgQueuer",
             "floor-store-pg": "floor: redrive's store alone (PostgreSQL)"}
    table = {name: Cells() for name in shown.values()}
    for short, cpu in (("redrive-pg", 27.3), ("pgqueuer", 29.3), ("floor-store-pg", 20.0)):
        table[shown[short]].add("CPU µs/job", cpu)
    names = {short: SimpleNamespace(name=name) for short, name in shown.items()}
    lines = Report(profile=PROFILES["quick"], repeats=1, table=table, names=names, backlog=None, dashboard=None,
                   matchmaking=None, seconds=60, when=datetime(2026, 11, 28, tzinfo=UTC),
                   machine="test").markdown().splitlines()
    # (27.3 ÷ 29.3) ÷ (50.4 ÷ 30.9): the worker's; (20.0 ÷ 29.3) ÷ (50.4 ÷ 30.9): its store's alone
    worker = next(line for line in lines if line.startswith("| redrive-pg: worker CPU per no-op job"))
    store = next(line for line in lines if line.startswith("| redrive's store alone for redrive-pg"))
    assert worker.endswith("| 0.57 | **no** |"), worker
    assert "(20 µs)" in store and store.endswith("| 0.42 | yes |"), store
    assert ("| redrive-pg CPU µs/job | 27.3 | floor: redrive's store alone (PostgreSQL) 20.0 | 1.36 | PgQueuer 29.3 "
            "| 0.93 |") in lines
