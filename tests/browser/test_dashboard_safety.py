"""Every page in Chromium with jobs whose arguments, errors, context and
outbox keys carry script payloads and planted secrets: no dialog opens, no
payload runs, no secret shows. The pages' screenshots are taken here too."""

from __future__ import annotations

import re
from datetime import timedelta

from redrive import Actor, App, Status, Workflow
from redrive.testing import wait_for
from tests.apps import dashboard
from tests.browser.conftest import login
from tests.canaries import CANARIES, leaked

MARKER = "XSS-FIRED"
PAYLOADS = [f'<script>console.log("{MARKER}")</script>', f'"><img src=x onerror=console.log("{MARKER}")>',
            "<img src=x onerror=alert(1)>", "javascript:alert(1)", "{{7*7}}"]
HOSTILE = " ".join(PAYLOADS + CANARIES)


def test_no_page_runs_a_payload_or_shows_a_secret(browser, dash_app: App, dash_url: str, worker, shots) -> None:
    dashboard.FAILING.add(HOSTILE)
    made = [dash_app.enqueue("flaky", args=[HOSTILE], idempotency_key=PAYLOADS[1]).job,
            dash_app.enqueue("review", args=[HOSTILE]).job,
            dash_app.enqueue("notify", args=[f"bounce {HOSTILE}"]).job,
            dash_app.enqueue("notify", args=["ana@example.com"]).job]
    made += [dash_app.enqueue("flaky", args=[f"doc-{n}"]).job for n in range(12)]
    wait_for(lambda: all(dash_app.client.job(j.id).status in (Status.SUCCEEDED, Status.FAILED) for j in made),
             timeout=15, what="the runs")
    dash_app.enqueue("convert", args=["later"], delay=timedelta(hours=1))
    letter_ids = [d.id for d in dash_app.admin(Actor.operator("t")).dead_letters()]
    assert len(letter_ids) >= 2

    page = login(browser, dash_url)
    dialogs, fired = [], []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("console", lambda m: fired.append(m.text) if MARKER in m.text else None)
    pages = {"overview": "/", "jobs-all": "/jobs", "jobs-failed": "/jobs?status=failed",
             "job-hostile": f"/jobs/{made[0].id}", "job-review": f"/jobs/{made[1].id}",
             "dead-letters-all": "/dead-letters", "schedules": "/schedules", "outbox": "/outbox",
             "outbox-failed": "/outbox?status=failed", "breakers-all": "/breakers"}
    pages |= {f"dead-letter-{n}": f"/dead-letters/{n}" for n in letter_ids}
    for name, path in pages.items():
        answer = page.goto(f"{dash_url}{path}")
        assert answer.status == 200, (path, answer.status)
        page.wait_for_timeout(150)  # let any image error handler have its chance
        html = page.content()
        assert leaked(html) == [], (path, leaked(html))
        assert not re.search(r"<img[^>]*onerror", html) and "<script>console" not in html, path
        if name in ("overview", "schedules", "outbox"):
            page.screenshot(path=shots / f"{name}.png", full_page=True)
    assert dialogs == [] and fired == []
    # The payloads are there, as text: escaped, not dropped
    page.goto(f"{dash_url}/jobs/{made[0].id}")
    shown = page.locator("pre").first.inner_text()  # JSON: the payloads' quotes are escaped
    assert "<script>console.log(" in shown and "<img src=x onerror=alert(1)>" in shown


def test_an_owner_is_kept_to_their_own_jobs(browser, dash_app: App, dash_url: str) -> None:
    theirs = dash_app.enqueue("flaky", args=["alice-private"], owner="alice").job
    bob = login(browser, dash_url, "bob")
    answer = bob.goto(f"{dash_url}/jobs/{theirs.id}")
    assert answer.status == 403 and "alice-private" not in bob.content()
    for path in ("/dead-letters", "/breakers", "/schedules", "/outbox", "/charts", "/dead-letters/1"):
        assert bob.goto(f"{dash_url}{path}").status == 403, path
    bob.goto(f"{dash_url}/jobs")
    assert str(theirs.id) not in bob.content()
    # an owner's workflows are theirs, as their jobs are: listed, and another's refused
    flaky = dash_app.registry.task("flaky")
    alices = dash_app.create_workflow(Workflow.chain("alice's", [flaky.call("alice-private")], owner="alice"))
    assert bob.goto(f"{dash_url}/workflows/{alices.id}").status == 403
    bob.goto(f"{dash_url}/workflows")
    assert str(alices.id) not in bob.content()
    assert bob.locator("nav").inner_text().split() == ["Overview", "Jobs", "Workflows"]  # no operator page offered
