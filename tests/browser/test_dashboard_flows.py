"""What an operator does in the dashboard, in Chromium: retry a failed job
from its row, replay a dead letter from its failed stage, force a breaker
open and closed and watch every page's banner follow."""

from __future__ import annotations

import pytest

from redrive import Actor, App, Status
from redrive.testing import wait_for
from tests.apps import dashboard
from tests.browser.conftest import login

DONE = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)


def test_a_failed_job_retried_from_its_row_runs_and_succeeds(browser, dash_app: App, dash_url: str, worker,
                                                             shots) -> None:
    dashboard.FAILING.add("quarterly-report")
    job = dash_app.enqueue("flaky", args=["quarterly-report"]).job
    wait_for(lambda: dash_app.client.job(job.id).status is Status.FAILED, timeout=15, what="the first failure")
    page = login(browser, dash_url)
    page.goto(f"{dash_url}/jobs?status=failed")
    row = page.locator(f'tr[data-job="{job.id}"]')
    assert row.locator(".status").inner_text() == "failed"
    page.screenshot(path=shots / "jobs.png", full_page=True)
    dashboard.FAILING.discard("quarterly-report")  # the cause is fixed: now retry
    row.get_by_role("button", name="Retry").click()
    page.wait_for_load_state()
    wait_for(lambda: dash_app.client.job(job.id).status is Status.SUCCEEDED, timeout=15, what="the retried run")
    page.goto(f"{dash_url}/jobs/{job.id}")
    assert page.locator("h1 .status").inner_text() == "succeeded"
    timeline = page.locator("table").last.inner_text()
    assert "ops" in timeline  # who retried it is on the timeline
    page.screenshot(path=shots / "job.png", full_page=True)


def test_a_dead_letter_replayed_from_its_stage_resumes_there(browser, dash_app: App, dash_url: str, worker,
                                                             shots) -> None:
    dashboard.FAILING.add("cl-42")
    job = dash_app.enqueue("review", args=["cl-42"]).job
    wait_for(lambda: dash_app.client.job(job.id).status is Status.FAILED, timeout=15, what="the failure")
    assert dashboard.EFFECTS == {"cl-42:fetch": 1, "cl-42:llm": 1}
    page = login(browser, dash_url)
    # The failed job's page links its dead letter and shows the last stack, redacted
    page.goto(f"{dash_url}/jobs/{job.id}")
    stack = page.locator("#last-stack").inner_text()
    assert "Traceback" in stack or "line" in stack, stack
    letter_id = dash_app.admin(Actor.operator("t")).dead_letters(job_id=job.id).items[0].id
    assert page.locator("#dead-letter").get_attribute("href").endswith(f"/dead-letters/{letter_id}")
    page.goto(f"{dash_url}/dead-letters")
    letter = page.locator("tr[data-letter]").first
    assert "PERMANENT" in letter.inner_text() or "llm" in letter.inner_text()
    page.screenshot(path=shots / "dead-letters.png", full_page=True)
    letter.locator("a").first.click()
    page.wait_for_load_state()
    page.screenshot(path=shots / "dead-letter.png", full_page=True)
    page.fill("textarea[name=text]", "the model limit was raised; replaying")
    page.get_by_role("button", name="Add note").click()
    page.wait_for_load_state()
    assert "the model limit was raised" in page.locator("ul.notes").inner_text()
    dashboard.FAILING.discard("cl-42")
    page.get_by_role("button", name="Replay from llm").click()
    page.wait_for_load_state()
    wait_for(lambda: dash_app.client.job(job.id).status is Status.SUCCEEDED, timeout=15, what="the replayed run")
    # The fetch stage's side effect happened once: the replay resumed at llm
    assert dashboard.EFFECTS == {"cl-42:fetch": 1, "cl-42:llm": 2}
    page.reload()
    assert page.locator("h1 .status").inner_text() == "replayed"


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_forcing_a_breaker_open_holds_its_jobs_and_bannners_every_page(browser, dash_app: App, dash_url: str,
                                                                       worker, shots) -> None:
    ops = login(browser, dash_url)
    watchers = []
    for path in ("/", "/jobs", "/dead-letters", "/schedules", "/outbox"):  # pages left open meanwhile
        other = ops.context.new_page()
        other.goto(f"{dash_url}{path}")
        assert other.locator("#banner").inner_text() == ""
        watchers.append(other)
    ops.goto(f"{dash_url}/breakers")
    ops.locator('tr[data-breaker="converter"]').get_by_role("button", name="Force open").click()
    ops.wait_for_load_state()
    banner = "converter is unavailable: its jobs are held and will resume automatically."
    assert ops.locator("#banner").inner_text() == banner
    for other in watchers:  # within one refresh (5 s), without a reload
        other.locator("#banner").get_by_text(banner).wait_for(timeout=8000)
    jobs = [dash_app.enqueue("convert", args=[f"doc-{n}"]).job for n in range(3)]
    # A job behind no breaker, enqueued after them, runs: the worker has
    # claimed since, and it would have taken them had they not been held
    control = dash_app.enqueue("flaky", args=["control"]).job
    wait_for(lambda: dash_app.client.job(control.id).status is Status.SUCCEEDED, timeout=15, what="the control job")
    assert {dash_app.client.job(j.id).status for j in jobs} == {Status.QUEUED}
    assert not any(key.endswith(":convert") for key in dashboard.EFFECTS)
    held = ops.context.new_page()
    held.goto(f"{dash_url}/jobs/{jobs[0].id}")
    assert held.locator("h1 .status").inner_text() == "queued"
    ops.screenshot(path=shots / "breakers.png", full_page=True)
    ops.locator('tr[data-breaker="converter"]').get_by_role("button", name="Close").click()
    ops.wait_for_load_state()
    assert ops.locator("#banner").inner_text() == ""
    for other in watchers:
        other.locator("#banner").get_by_text(banner).wait_for(state="detached", timeout=8000)
    wait_for(lambda: all(dash_app.client.job(j.id).status is Status.SUCCEEDED for j in jobs),
             timeout=15, what="the drain")
    assert sum(n for key, n in dashboard.EFFECTS.items() if key.endswith(":convert")) == 3
    # The held job's page, open all along, says so by itself
    held.locator("h1 .status").get_by_text("succeeded").wait_for(timeout=8000)
