"""The charts page in Chromium: jobs a real worker ran, drawn per queue and
per task from the rollups, over the windows an operator picks."""

from __future__ import annotations

from redrive import Actor, App, Status
from redrive.testing import wait_for
from tests.apps import dashboard
from tests.browser.conftest import BackgroundWorker, login


def test_the_charts_show_what_the_worker_ran_per_queue_and_per_task(browser, dash_app: App, dash_url: str,
                                                                     shots) -> None:
    dashboard.FAILING.update({"bad-1", "bad-2"})
    jobs = [dash_app.enqueue("flaky", args=[f"ok-{n}"], queue="email").job for n in range(12)]
    jobs += [dash_app.enqueue("flaky", args=[f"bad-{n}"], queue="email").job for n in (1, 2)]
    jobs += [dash_app.enqueue("convert", args=[f"doc-{n}"], queue="documents").job for n in range(5)]
    worker = BackgroundWorker(dash_app, queues={"email": None, "documents": None})
    try:
        wait_for(lambda: all(dash_app.client.job(j.id).status in (Status.SUCCEEDED, Status.FAILED) for j in jobs),
                 timeout=20, what="the worker running every job")
    finally:
        worker.stop()

    page = login(browser, dash_url)
    page.click("nav >> text=Charts")
    page.wait_for_url("**/charts")
    email = page.locator("section[data-series=email]")
    assert email.locator("[data-total=succeeded]").inner_text() == "12"
    assert email.locator("[data-total=failed]").inner_text() == "2"
    assert page.locator("section[data-series=documents] [data-total=succeeded]").inner_text() == "5"
    assert email.locator("rect.succeeded").count() >= 1 and email.locator("rect.failed").count() >= 1
    # every drawn bar is tall enough to see
    heights = [float(h) for h in email.locator("rect").evaluate_all("rs => rs.map(r => r.getAttribute('height'))")]
    assert heights and min(heights) >= 2
    page.screenshot(path=str(shots / "charts.png"), full_page=True)

    page.click("[data-window='24h']")
    page.click("[data-by=task]")
    page.wait_for_url("**/charts?window=24h&by=task")
    assert page.locator("section[data-series=flaky] [data-total=succeeded]").inner_text() == "12"
    assert page.locator("section[data-series=convert] [data-total=succeeded]").inner_text() == "5"
    api = dash_app.admin(Actor.operator("t")).charts("24h", by="task")[0]
    assert {s.key: s.totals()["succeeded"] for s in api} == {"flaky": 12, "convert": 5}

    page.goto(f"{dash_url}/charts?window=1y")
    assert "window must be one of 1h, 24h, 7d" in page.locator("body").inner_text()
