"""The overview's workers: a supervisor with its worker processes under it,
their pid, jobs run, memory and orphaned threads, and why it replaced one."""

from __future__ import annotations

from pathlib import Path

from redrive import App
from redrive.store.port import WorkerReport
from tests.browser.conftest import login


def test_the_overview_lists_a_supervisors_children_under_it_and_why_one_was_replaced(
        browser, dash_app: App, dash_url: str, shots: Path) -> None:
    store = dash_app.store
    store.worker_report(report=WorkerReport(
        "build-1:4100", "build-1", 4100, ["default"], 0, "0.1.0", running=0, memory_bytes=38 << 20, children=2,
        restarts=1, replaced=[{"pid": 4170, "worker": "build-1:4100.0c4e1d", "at": "2026-11-26T10:12:03+00:00",
                               "why": "recycled: it uses 241 MiB, past its limit of 191 MiB"}]))
    for pid, ran, orphaned in ((4187, 12, 0), (4190, 7, 2)):
        store.worker_report(report=WorkerReport(
            f"build-1:4100.{pid}", "build-1", pid, ["default"], 2, "0.1.0", running=1, jobs_run=ran,
            memory_bytes=141 << 20, orphaned=orphaned, supervisor="build-1:4100"))
    page = login(browser, dash_url)
    rows = page.locator("tr[data-worker]")
    assert [rows.nth(n).get_attribute("data-worker") for n in range(rows.count())] == [
        "build-1:4100", "build-1:4100.4187", "build-1:4100.4190"]
    supervisor = rows.nth(0).inner_text()
    assert "supervisor" in supervisor and "2 processes" in supervisor and "1 restart" in supervisor
    child = rows.nth(2).inner_text()
    assert "4190" in child and "1 of 2" in child and "2 orphaned" in child and "141 MiB" in child and "7" in child
    # and why it replaced one, below its children
    table = page.locator("tr", has=page.locator("td")).all_inner_texts()
    told = next(n for n, row in enumerate(table) if "replaced pid 4170" in row)
    assert "past its limit of 191 MiB" in table[told]
    assert told > next(n for n, row in enumerate(table) if "build-1:4100.4190" in row)
    page.screenshot(path=str(shots / "overview-workers.png"), full_page=True)
    page.context.close()
