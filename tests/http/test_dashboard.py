"""The dashboard, called in this process as a browser would drive its forms:
login and its cookie, the security headers, escaping, owners kept to their
own jobs, forged posts refused, retry from a page, and the breaker banner.
(The browser flows themselves are the Playwright tests'.)"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx

from redrive import Actor, App, Status
from tests.canaries import CANARIES, leaked
from tests.http.conftest import IN_PROCESS, TOKENS, as_
from tests.integration.test_worker_in_process import _run_until

DONE = (Status.SUCCEEDED, Status.FAILED)
XSS = ["<script>alert('xss')</script>", '"><img src=x onerror=alert(1)>']


def _browser(api: Any, who: str) -> httpx.Client:
    """Logged in through the form, as a browser is: the session is a cookie."""
    client = as_(None, api)
    client.headers["Origin"] = IN_PROCESS
    answer = client.post("/login", data={"token": TOKENS[who]})
    assert answer.status_code == 303, answer.text
    return client


def _csrf(page: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)


def test_every_page_names_its_icon_so_no_browser_asks_for_a_favicon_that_is_not_there(api) -> None:
    login = as_(None, api).get("/login").text
    (icon,) = re.findall(r'<link rel="icon" href="([^"]+)"', login)
    assert as_(None, api).get(icon).status_code == 200
    assert re.findall(r'<link rel="icon" href="([^"]+)"', _browser(api, "operator").get("/").text) == [icon]


def test_login_sets_a_strict_http_only_cookie_and_a_wrong_token_is_refused(api) -> None:
    anonymous = as_(None, api)
    assert anonymous.get("/").status_code == 303 and anonymous.get("/").headers["location"].endswith("/login")
    wrong = as_(None, api).post("/login", data={"token": "nope-0123456789abcdef"}, headers={"Origin": IN_PROCESS})
    assert wrong.status_code == 401 and "not valid" in wrong.text
    answer = as_(None, api).post("/login", data={"token": TOKENS["alice"]}, headers={"Origin": IN_PROCESS})
    cookie = answer.headers["set-cookie"].lower()
    assert answer.status_code == 303 and "httponly" in cookie and "samesite=strict" in cookie


def test_pages_forbid_inline_script_and_escape_what_jobs_carry(api, api_app: App) -> None:
    job = api_app.enqueue("fail", args=[" ".join(XSS + CANARIES)], owner="alice").job
    asyncio.run(_run_until(api_app, lambda: api_app.client.job(job.id).status is Status.FAILED))
    alice, ops = _browser(api, "alice"), _browser(api, "operator")
    for client in (alice, ops):
        for path in ("/", "/jobs", f"/jobs/{job.id}", "/jobs?status=failed"):
            page = client.get(path)
            assert page.status_code == 200, (path, page.text[:300])
            csp = page.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
            assert re.findall(r"<script(?![^>]*\bsrc=)", page.text) == []  # no inline script at all
            assert "<img src=x" not in page.text and "<script>alert" not in page.text
            assert leaked(page.text) == [], (path, leaked(page.text))
    assert "&lt;script&gt;" in ops.get(f"/jobs/{job.id}").text  # shown, escaped


def test_an_owner_sees_only_their_own_jobs_and_no_operator_page(api, api_app: App) -> None:
    mine = api_app.enqueue("greet", args=["alice-only-data"], owner="alice").job
    bob = _browser(api, "bob")
    refused = bob.get(f"/jobs/{mine.id}")
    assert refused.status_code == 403 and "alice-only-data" not in refused.text
    assert str(mine.id) not in bob.get("/jobs").text
    assert "alice-only-data" not in bob.get("/").text and "shown to operators" in bob.get("/").text


def test_a_forged_post_changes_nothing_and_a_real_one_retries(api, api_app: App) -> None:
    job = api_app.enqueue("fail", args=["x"], owner="alice").job
    asyncio.run(_run_until(api_app, lambda: api_app.client.job(job.id).status is Status.FAILED))
    alice = _browser(api, "alice")
    token = _csrf(alice.get(f"/jobs/{job.id}").text)
    forged = [
        alice.post(f"/jobs/{job.id}/retry", data={"csrf": token}, headers={"Origin": "https://evil.example"}),
        alice.post(f"/jobs/{job.id}/retry", data={"csrf": "0" * 64}),
        alice.post(f"/jobs/{job.id}/retry", data={}),
        as_(None, api).post(f"/jobs/{job.id}/retry", data={"csrf": token}, headers={"Origin": IN_PROCESS}),
    ]
    assert [a.status_code for a in forged] == [403, 403, 403, 401]
    assert api_app.client.job(job.id).status is Status.FAILED  # nothing changed
    done = alice.post(f"/jobs/{job.id}/retry", data={"csrf": token})
    assert done.status_code == 303 and api_app.client.job(job.id).status is Status.QUEUED
    assert "Retried" in alice.get(done.headers["location"]).text


def _state(api_app: App, job_ids, letter_id: int) -> tuple:
    """Everything a dashboard form can change."""
    ops = api_app.admin(Actor.operator("test"))
    letter = ops.dead_letter(letter_id)
    return ([api_app.client.job(j).status for j in job_ids], letter.notes, letter.replayed_at,
            {n: b.state for n, b in ops.breakers().items()})


def test_a_forged_cross_origin_post_to_any_form_is_refused_and_changes_nothing(api,
                                                                               api_app: App) -> None:
    failed = api_app.enqueue("fail", args=["x"]).job
    asyncio.run(_run_until(api_app, lambda: api_app.client.job(failed.id).status is Status.FAILED))
    waiting = api_app.enqueue("greet", args=["y"]).job
    (letter,) = api_app.admin(Actor.operator("test")).dead_letters()
    ops = _browser(api, "operator")
    token = _csrf(ops.get("/").text)
    forms = {
        f"/jobs/{failed.id}/retry": {}, f"/jobs/{waiting.id}/cancel": {},
        "/jobs/bulk": {"act": "retry", "ids": [str(failed.id)]},
        "/dead-letters/replay": {"ids": [str(letter.id)]}, f"/dead-letters/{letter.id}/notes": {"text": "forged"},
        "/breakers/mailer/open": {}, "/breakers/mailer/close": {}, "/logout": {},
    }
    before = _state(api_app, [failed.id, waiting.id], letter.id)
    for path, fields in forms.items():
        for origin in ({"Origin": "https://evil.example"},
                       {"Origin": "null"},
                       {"Origin": "", "Referer": "https://evil.example/page"}):
            answer = ops.post(path, data={"csrf": token, **fields}, headers=origin)
            assert answer.status_code == 403, (path, origin, answer.status_code)
            assert "did not come from this dashboard" in answer.text
        assert _state(api_app, [failed.id, waiting.id], letter.id) == before, path
    assert ops.get("/").status_code == 200  # the forged logout did not end the session
    # The same forms from the dashboard's own pages work
    assert ops.post(f"/dead-letters/{letter.id}/notes", data={"csrf": token, "text": "real"}).status_code == 303
    assert ops.post("/breakers/mailer/open", data={"csrf": token}).status_code == 303
    assert _state(api_app, [failed.id, waiting.id], letter.id)[3]["mailer"] == "open"


def test_an_open_hold_breaker_puts_a_banner_on_every_page(api, api_app: App) -> None:
    ops = _browser(api, "operator")
    api_app.admin(Actor.operator("test")).open_breaker("mailer")
    for path in ("/", "/jobs", "/_banner"):
        assert "mailer is unavailable: its jobs are held and will resume automatically" in ops.get(path).text
    api_app.admin(Actor.operator("test")).close_breaker("mailer")
    assert "mailer is unavailable" not in ops.get("/_banner").text


def test_the_overview_counts_equal_the_apis(api, api_app: App) -> None:
    ran = [api_app.enqueue("greet", args=[str(n)], queue="mail").job for n in range(2)]
    ran.append(api_app.enqueue("fail", args=["x"], queue="mail").job)
    asyncio.run(_run_until(api_app, lambda: all(api_app.client.job(j.id).status in DONE for j in ran),
                           queues=["mail"]))
    for n in range(3):
        api_app.enqueue("greet", args=[str(n)], queue="mail")
    ops, json_api = _browser(api, "operator"), as_("operator", api)
    (queue,) = [q for q in json_api.get("/api/v1/queues").json()["items"] if q["queue"] == "mail"]
    ended = json_api.get("/api/v1/queues/throughput").json()["items"]
    hour = {status: sum(c["count"] for c in ended if c["queue"] == "mail" and c["status"] == status)
            for status in ("succeeded", "failed")}
    for page in (ops.get("/").text, ops.get("/_counts").text):
        row = re.search(r'<tr data-queue="mail">(.*?)</tr>', page, re.S).group(1)
        shown = dict(re.findall(r'data-count="([\w-]+)">(\d+)<', row))
        assert {k: int(v) for k, v in shown.items()} == {
            "scheduled": queue["counts"]["scheduled"], "queued": queue["counts"]["queued"],
            "running": queue["counts"]["running"], "succeeded-hour": hour["succeeded"],
            "failed-hour": hour["failed"]}
        assert (queue["counts"]["queued"], hour["succeeded"], hour["failed"]) == (3, 2, 1)
        assert '<rect class="ok"' in row and '<rect class="failed"' in row  # this minute's bar


def test_bad_query_values_get_a_page_not_a_crash(api) -> None:
    ops = _browser(api, "operator")
    for path, status in (("/jobs?limit=lots", 200), ("/jobs?status=sideways", 422), ("/jobs?cursor=%%%", 422),
                         ("/jobs/not-a-job", 404), ("/jobs/01a20000-0000-7000-8000-000000000000", 404),
                         ("/jobs?since=yesterday", 422), ("/jobs?since=2026-11-23T10:00", 200),
                         ("/dead-letters?state=lost", 422), ("/dead-letters?older_than_h=old", 422),
                         ("/dead-letters?newer_than_h=-3", 422), ("/dead-letters?cursor=%%%", 422),
                         ("/dead-letters/nine", 404), ("/dead-letters/999999", 404),
                         ("/outbox?status=lost", 422), ("/outbox?status=failed&cursor=%%%", 422)):
        page = ops.get(path)
        assert page.status_code == status, (path, page.status_code, page.text[:200])
        assert "Traceback" not in page.text and "site-packages" not in page.text
    token = _csrf(ops.get("/").text)
    for path, fields, status in (("/jobs/bulk", {"act": "explode", "ids": ["x"]}, 422),
                                 ("/jobs/bulk", {"act": "retry"}, 422),
                                 ("/jobs/bulk", {"act": "retry", "ids": ["not-a-job"]}, 303),
                                 ("/dead-letters/replay", {}, 422),
                                 ("/dead-letters/replay", {"ids": ["nine"]}, 404),
                                 ("/dead-letters/1/notes", {"text": "  "}, 422),
                                 ("/breakers/nothing-like-it/open", {}, 404),
                                 ("/jobs/bulk", {"act": "retry", "ids": ["x"], "back": "//evil.example/"}, 303)):
        page = ops.post(path, data={"csrf": token, **fields})
        assert page.status_code == status, (path, fields, page.status_code, page.text[:200])
        assert "Traceback" not in page.text and "site-packages" not in page.text
        if status == 303:  # back to a page of this dashboard, saying what was not done
            assert page.headers["location"].startswith("/jobs?done=retry_selected&n=0&of=1"), page.headers["location"]


def test_mounted_under_a_prefix_every_link_form_and_cookie_stays_under_it(api_app: App) -> None:
    from fastapi import FastAPI

    from redrive.http import TokenAuth, create_api
    from redrive.http.auth import parse_tokens
    from tests.http.conftest import SPECS

    host = FastAPI()
    host.mount("/ops", create_api(api_app, auth=TokenAuth(parse_tokens(SPECS))))
    job = api_app.enqueue("fail", args=["x"]).job
    asyncio.run(_run_until(api_app, lambda: api_app.client.job(job.id).status is Status.FAILED))
    browser = as_(None, host)
    browser.headers["Origin"] = IN_PROCESS
    assert browser.get("/ops/").headers["location"] == "/ops/login"
    login = browser.post("/ops/login", data={"token": TOKENS["operator"]})
    assert login.headers["location"] == "/ops/" and "path=/ops" in login.headers["set-cookie"].lower()
    page = browser.get("/ops/jobs?status=failed").text
    links = re.findall(r'(?:href|src|action|hx-get)="([^"]+)"', page)
    assert links and all(link.startswith(("/ops/", "?")) for link in links), links
    assert browser.get("/ops/static/htmx.min.js").status_code == 200
    retried = browser.post(f"/ops/jobs/{job.id}/retry", data={"csrf": _csrf(page)})
    assert retried.status_code == 303 and retried.headers["location"].startswith(f"/ops/jobs/{job.id}?done=")
    assert api_app.client.job(job.id).status is Status.QUEUED
    assert browser.get("/api/v1/jobs").status_code == 404  # nothing outside the prefix


def test_dead_letters_show_the_apis_facets_and_mark_the_escalated(api, api_app: App) -> None:
    ops_admin = api_app.admin(Actor.operator("test"))
    jobs = [api_app.enqueue("fail", args=[f"bad {n}"]).job for n in range(3)]
    asyncio.run(_run_until(api_app, lambda: all(api_app.client.job(j.id).status is Status.FAILED for j in jobs)))
    first = next(d for d in ops_admin.dead_letters() if d.job_id == jobs[0].id)
    ops = _browser(api, "operator")
    token = _csrf(ops.get("/dead-letters").text)
    replayed = ops.post("/dead-letters/replay", data={"csrf": token, "ids": [str(first.id)], "start": "0"})
    assert replayed.status_code == 303 and replayed.headers["location"].endswith("done=replayed&n=1&skipped=0")
    asyncio.run(_run_until(api_app, lambda: api_app.client.job(jobs[0].id).status is Status.FAILED
                           and len(list(ops_admin.dead_letters())) == 4))
    page = ops.get("/dead-letters").text
    facets = as_("operator", api).get("/api/v1/dead-letters/facets").json()
    assert f"<h2>{facets['total']} matching</h2>" in page
    for name, count in facets["error_classes"].items():
        assert re.search(rf'data-facet="error_class">{re.escape(name)}</a> <span class="num">{count}</span>', page)
    (escalated,) = [d for d in ops_admin.dead_letters() if d.escalated]
    assert re.search(rf'<tr data-letter="{escalated.id}" class="escalated">', page)
    letter_page = ops.get(f"/dead-letters/{escalated.id}").text
    assert "Escalated: a replay failed again" in letter_page
    # A page other than the lists and the job's shows times in UTC, to the second (docs/dashboard.md)
    for name in ("first failure", "last failure"):
        shown = re.search(rf"<dt>{name}</dt><dd>([^<]*)</dd>", letter_page).group(1)
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", shown), (name, shown)
    only = ops.get("/dead-letters?state=escalated").text
    assert only.count("<tr data-letter=") == 1 and "<h2>1 matching</h2>" in only


def test_the_line_saying_what_was_done_comes_from_the_dashboard_never_from_the_link(api) -> None:
    ops = as_("operator", api)
    told = ops.get("/jobs?done=retry_selected&n=3&of=5")
    assert '<p class="flash">Retried 3 of 5; the rest were not failed, or not yours to retry.</p>' in told.text
    for forged in ("/jobs?done=Your+account+is+locked:+call+555-0100", "/jobs?done=retry_selected&n=3+or+more",
                   "/jobs?done=retry_selected&n=99999999999", "/jobs?done=__class__"):
        page = ops.get(forged)
        assert page.status_code == 200 and 'class="flash"' not in page.text, forged
        assert "555-0100" not in page.text


def test_the_session_cookie_is_an_id_of_its_own_that_logout_and_the_tokens_removal_end(api, api_app: App) -> None:
    from redrive.http import TokenAuth, create_api
    from redrive.http.auth import parse_tokens
    from tests.http.conftest import SPECS

    ops = _browser(api, "operator")
    cookie = ops.cookies.get("redrive_session")
    assert cookie and TOKENS["operator"] not in cookie and len(cookie) >= 40
    assert ops.get("/").status_code == 200
    # The same cookie in another browser works while the session lasts, and not after the logout
    stolen = as_(None, api)
    stolen.cookies.set("redrive_session", cookie)
    assert stolen.get("/").status_code == 200
    assert ops.post("/logout", data={"csrf": _csrf(ops.get("/").text)}).status_code == 303
    assert stolen.get("/").status_code == 303 and stolen.get("/").headers["location"].endswith("/login")
    # A token taken out of the configuration ends the sessions opened with it
    alice = _browser(api, "alice")
    assert alice.get("/jobs").status_code == 200
    without_alice = create_api(api_app, auth=TokenAuth(parse_tokens([s for s in SPECS if "owner:alice" not in s])))
    moved = as_(None, without_alice)
    moved.cookies.set("redrive_session", alice.cookies.get("redrive_session"))
    assert moved.get("/jobs").status_code == 303


def test_a_finished_job_is_deleted_from_its_page(api, api_app: App) -> None:
    job = api_app.enqueue("greet", args=["x"]).job
    api_app.admin(Actor.operator("test")).cancel(job.id)
    ops = _browser(api, "operator")
    page = ops.get(f"/jobs/{job.id}").text
    assert f'action="/jobs/{job.id}/delete"' in page
    gone = ops.post(f"/jobs/{job.id}/delete", data={"csrf": _csrf(page)})
    assert gone.status_code == 303 and gone.headers["location"] == "/jobs?done=deleted"
    assert "Deleted: the job" in ops.get("/jobs?done=deleted").text
    assert ops.get(f"/jobs/{job.id}").status_code == 404


def test_every_open_dead_letter_a_filter_matches_is_replayed_after_its_count_is_confirmed(api, api_app: App) -> None:
    jobs = [api_app.enqueue("fail", args=[f"bad {n}"]).job for n in range(3)]
    asyncio.run(_run_until(api_app, lambda: all(api_app.client.job(j.id).status is Status.FAILED for j in jobs)))
    ops = _browser(api, "operator")
    listing = ops.get("/dead-letters?task=fail").text
    assert 'action="/dead-letters/matching"' in listing
    fields = {"csrf": _csrf(listing), "task": "fail", "start": "0"}
    confirm = ops.post("/dead-letters/matching", data=fields)
    assert confirm.status_code == 200 and "Replay 3 matching open dead letters?" in confirm.text
    assert api_app.admin(Actor.operator("t")).dead_letter_facets(state="open").total == 3  # counted only
    done = ops.post("/dead-letters/matching", data={**fields, "confirm": "yes"})
    assert done.status_code == 303 and done.headers["location"].endswith("done=replayed_matching&n=3&skipped=0")
    assert api_app.admin(Actor.operator("t")).dead_letter_facets(state="open").total == 0
    assert as_("viewer", api).post("/dead-letters/matching", data=fields).status_code in (403, 401)


def test_dead_letters_are_resolved_from_their_page_and_by_filter_after_the_count_is_confirmed(api, api_app: App) -> None:
    jobs = [api_app.enqueue("fail", args=[f"bad {n}"]).job for n in range(4)]
    asyncio.run(_run_until(api_app, lambda: all(api_app.client.job(j.id).status is Status.FAILED for j in jobs)))
    admin = api_app.admin(Actor.operator("t"))
    first = admin.dead_letters(job_id=jobs[0].id).items[0]
    ops = _browser(api, "operator")
    # One letter, from its page, with why
    page = ops.get(f"/dead-letters/{first.id}").text
    assert 'action="/dead-letters/resolve"' in page and "Resolve without a replay" in page
    done = ops.post("/dead-letters/resolve", data={"csrf": _csrf(page), "ids": str(first.id),
                                                   "note": "refunded by hand", "back": f"/dead-letters/{first.id}"})
    assert done.status_code == 303 and done.headers["location"].endswith("done=resolved&n=1&skipped=0")
    shown = ops.get(done.headers["location"]).text
    assert "Resolved 1; 0 had been replayed or resolved already." in shown
    assert "refunded by hand" in shown and "without a replay" in shown and "Replay from" not in shown
    # Every open one the filter matches: the count first, then the resolve, with the note on each
    listing = ops.get("/dead-letters?task=fail").text
    assert 'data-act="resolve-matching"' in listing
    fields = {"csrf": _csrf(listing), "task": "fail", "act": "resolve"}
    confirm = ops.post("/dead-letters/matching", data=fields)
    assert confirm.status_code == 200 and "Resolve 3 matching open dead letters?" in confirm.text
    assert 'name="note"' in confirm.text and admin.dead_letter_facets(state="open").total == 3
    done = ops.post("/dead-letters/matching", data={**fields, "confirm": "yes", "note": "written off"})
    assert done.status_code == 303 and done.headers["location"].endswith("done=resolved_matching&n=3&skipped=0")
    assert admin.dead_letter_facets(state="open").total == 0
    assert {d.notes[-1]["text"] for d in admin.dead_letters(state="resolved").items} == {"refunded by hand",
                                                                                        "written off"}
    assert as_("viewer", api).post("/dead-letters/resolve", data={"ids": str(first.id)}).status_code in (403, 401)


def test_times_a_page_shows_relative_to_now_are_on_the_databases_clock(tmp_path) -> None:
    # A database whose clock is an hour ahead of this server's: a job it just
    # created is "just now" on its page, not "in 1 h" (this server's clock)
    from datetime import UTC, datetime, timedelta

    from redrive.http import TokenAuth, create_api
    from redrive.http.auth import parse_tokens
    from redrive.store.sqlite.store import SQLiteStore
    from tests.http.conftest import SPECS

    app = App(store=SQLiteStore(str(tmp_path / "ahead.db"), clock=lambda: datetime.now(UTC) + timedelta(hours=1)))

    @app.task
    def greet(name: str) -> str:
        return name

    try:
        job = app.enqueue("greet", args=["x"]).job
        page = _browser(create_api(app, auth=TokenAuth(parse_tokens(SPECS))), "operator").get(f"/jobs/{job.id}")
        assert page.status_code == 200, page.text[:300]
        created = re.search(r"<dt>created</dt><dd><time [^>]*>([^<]+)</time>", page.text).group(1)
        assert created == "just now" or created.endswith(" s ago"), created
    finally:
        app.close()
