"""Operators' controls in the dashboard, in Chromium: pause and resume a
queue from the overview, run a schedule now from its page (the same form
twice runs it once); a read-only operator sees every page, finds no action
on them, and every action sent anyway is refused with 403, nothing changed."""

from __future__ import annotations

import pytest

from redrive import Actor, App, Status
from redrive.testing import count_jobs
from tests.browser.conftest import login


def test_an_operator_pauses_and_resumes_a_queue_and_runs_a_schedule_now(browser, dash_app: App, dash_url: str,
                                                                          shots) -> None:
    dash_app.enqueue("flaky", args=["x"], queue="email")  # a queue with a job: listed on the overview
    page = login(browser, dash_url)
    row = page.locator("tr[data-queue=email]")
    row.locator("button[data-act=pause]").click()
    page.wait_for_url("**/?done=*")
    assert "Queue paused" in page.locator(".flash").inner_text()
    assert page.locator("tr[data-queue=email]").inner_text().count("by ops") == 1
    assert dash_app.admin(Actor.operator("t")).queues()[0].paused_by == "ops"
    page.screenshot(path=str(shots / "queue-paused.png"), full_page=True)
    page.locator("tr[data-queue=email] button[data-act=resume]").click()
    page.wait_for_url("**/?done=*")
    assert "Queue resumed" in page.locator(".flash").inner_text()
    assert dash_app.admin(Actor.operator("t")).queues()[0].paused_by is None

    page.goto(f"{dash_url}/schedules")
    form = page.locator("tr[data-schedule=morning-digest] form", has=page.locator("button[data-act=run]"))
    sent = {name: form.locator(f"input[name={name}]").get_attribute("value") for name in ("csrf", "run")}
    form.locator("button[data-act=run]").click()
    page.wait_for_url("**/schedules?done=*")
    assert "Ran now: 2 job(s) queued" in page.locator(".flash").inner_text()  # one per time zone
    # The same form again, as a double submit sends it: nothing more
    again = page.request.post(f"{dash_url}/schedules/morning-digest/run", form=sent, headers={"Origin": dash_url})
    assert again.ok and again.url.endswith("/schedules?done=schedule_ran_already")
    ran = [j for j in dash_app.client.jobs(limit=50).items if (j.idempotency_key or "").startswith("morning-digest:now-")]
    assert len(ran) == 2
    page.screenshot(path=str(shots / "schedule-run-now.png"), full_page=True)
    page.goto(f"{dash_url}/schedules")
    page.locator("tr[data-schedule=morning-digest] button[data-act=pause]").click()
    page.wait_for_url("**/schedules?done=schedule_paused")
    assert "paused" in page.locator("tr[data-schedule=morning-digest]").first.inner_text()
    assert dash_app.admin(Actor.operator("t")).schedules()[0].paused_by == "ops"
    page.locator("tr[data-schedule=morning-digest] button[data-act=resume]").click()
    page.wait_for_url("**/schedules?done=schedule_resumed")
    assert dash_app.admin(Actor.operator("t")).schedules()[0].paused_by is None
    audit = [e.action for e in dash_app.admin(Actor.operator("t")).audit_trail()]
    assert audit == ["pause_queue", "resume_queue", "run_schedule", "pause_schedule", "resume_schedule"]
    page.context.close()


def test_a_read_only_operator_sees_every_page_and_every_action_is_refused(browser, dash_app: App, dash_url: str,
                                                                          shots) -> None:
    failed = dash_app.enqueue("flaky", args=["x"], queue="email").job
    store = dash_app.store
    from datetime import timedelta

    from redrive.core.transitions import FailNow

    (claimed,) = store.jobs_claim(queues=["email"], limit=1, worker_id="t", lease_ttl=timedelta(minutes=5))
    store.jobs_finish([FailNow(claimed.lease, "BAD_INPUT", "no")])
    waiting = dash_app.enqueue("flaky", args=["y"], queue="email").job
    letter = dash_app.admin(Actor.operator("t")).dead_letters().items[0]
    def state() -> tuple:
        ops = dash_app.admin(Actor.operator("t"))
        return (count_jobs(dash_app.store), [(q.queue, q.counts, q.paused_by) for q in ops.queues()],
                ops.audit_trail(), ops.dead_letter(letter.id), ops.breakers()["converter"].state)

    before = state()

    page = login(browser, dash_url, "viewer")
    assert "(read-only)" in page.locator("header .who").inner_text()
    pages = ["/", "/jobs", f"/jobs/{failed.id}", "/dead-letters", f"/dead-letters/{letter.id}", "/breakers",
             "/schedules", "/outbox", "/charts"]
    for path in pages:
        answer = page.goto(f"{dash_url}{path}")
        assert answer is not None and answer.status == 200, path
        # Nothing on the page acts: the only form left is the logout
        actions = [a for a in page.locator("main form[method=post]").evaluate_all("fs => fs.map(f => f.action)")]
        assert actions == [], (path, actions)
    page.goto(f"{dash_url}/")
    assert page.locator("tr[data-queue=email]").count() == 1  # it sees the queues
    page.screenshot(path=str(shots / "read-only-overview.png"), full_page=True)

    # Every action sent anyway, with its own session's CSRF token: 403, nothing changed
    csrf = page.locator("header input[name=csrf]").get_attribute("value")
    sent = {"/queues/email/pause": {}, "/schedules/morning-digest/run": {"run": "r1"},
            f"/jobs/{failed.id}/retry": {}, f"/jobs/{waiting.id}/cancel": {},
            "/jobs/bulk": {"act": "cancel", "ids": str(waiting.id)},
            "/dead-letters/replay": {"ids": str(letter.id), "start": "0"},
            f"/dead-letters/{letter.id}/notes": {"text": "looked"}, "/breakers/converter/open": {}}
    for path, form in sent.items():
        answer = page.request.post(f"{dash_url}{path}", form={"csrf": csrf, **form},
                                   headers={"Origin": dash_url}, max_redirects=0)
        assert answer.status == 403, (path, answer.status)
        assert "read-only operator" in answer.text(), path
    assert state() == before
    assert dash_app.client.job(waiting.id).status is Status.QUEUED
    page.context.close()


def test_every_job_a_filter_matches_is_retried_after_its_count_is_confirmed(browser, dash_app: App, dash_url: str,
                                                                            shots) -> None:
    from datetime import timedelta

    from redrive import JobRequest
    from redrive.core.transitions import FailNow

    dash_app.enqueue_many([JobRequest("flaky", args=[str(n)], queue="email") for n in range(60)]
                          + [JobRequest("flaky", args=[str(n)], queue="reports") for n in range(5)])
    store = dash_app.store
    claimed = store.jobs_claim(queues=["email", "reports"], limit=100, worker_id="t", lease_ttl=timedelta(minutes=5))
    store.jobs_finish([FailNow(job.lease, "BAD_INPUT", "no") for job in claimed])
    page = login(browser, dash_url)
    page.goto(f"{dash_url}/jobs?status=failed&queue=email&limit=20")  # a page of 20; 60 match
    page.locator("#matching button[data-act=retry-matching]").click()
    assert page.locator("h1").inner_text() == "Retry 60 matching jobs?"
    page.screenshot(path=str(shots / "bulk-confirm.png"), full_page=True)
    assert count_jobs(dash_app.store)[Status.FAILED] == 65  # counted, nothing done yet
    page.locator("button[data-act=confirm]").click()
    page.wait_for_url("**/jobs?*done=retry_matching*")
    assert page.locator(".flash").inner_text() == "Retried 60 matching jobs; 0 had changed meanwhile."
    counts = count_jobs(dash_app.store)
    assert (counts[Status.QUEUED], counts[Status.FAILED]) == (60, 5)  # the other queue's are left alone
    trail = dash_app.admin(Actor.operator("t")).audit_trail()
    assert [(e.action, e.detail["count"]) for e in trail] == [("bulk_retry", 60)]
    page.context.close()


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_the_jobs_list_refreshes_by_itself_until_updates_are_paused(browser, dash_app: App, dash_url: str) -> None:
    page = login(browser, dash_url)
    page.goto(f"{dash_url}/jobs")
    first = dash_app.enqueue("flaky", args=["a"]).job
    page.wait_for_selector(f"tr[data-job='{first.id}']", timeout=15_000)  # it came without a reload
    when = page.locator(f"tr[data-job='{first.id}'] time")
    assert when.get_attribute("title").endswith(" UTC")  # the exact time on hover
    assert when.inner_text() == "just now" or when.inner_text().endswith(" ago")
    page.check("#live-pause")
    second = dash_app.enqueue("flaky", args=["b"]).job
    page.wait_for_timeout(6_000)  # longer than a refresh (every 5 s): none came
    assert page.locator(f"tr[data-job='{second.id}']").count() == 0
    page.uncheck("#live-pause")
    page.wait_for_selector(f"tr[data-job='{second.id}']", timeout=15_000)
    assert page.request.get(f"{dash_url}/static/favicon.svg").ok
    assert page.locator("link[rel=icon]").count() == 1
    page.context.close()
