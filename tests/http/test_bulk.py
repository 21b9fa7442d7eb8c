"""Bulk actions by filter (POST /api/v1/jobs/bulk, redrive jobs retry|cancel
with a filter), on PostgreSQL through a real server: 5,000 failed jobs of
two owners; an owner acts on their own only, an operator on all; one audit
entry per action with its filter and count; a dry run changes nothing."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import httpx
import pytest

from redrive import Actor, App, JobRequest, Status
from redrive.core.transitions import FailNow
from redrive.http import TokenAuth, create_api
from redrive.http.auth import parse_tokens
from tests.figures import record
from tests.http.conftest import SPECS, as_, make_app, serving
from tests.integration.processes import REPO

pytestmark = pytest.mark.postgres

PER_OWNER = 2500


def _fail_all(app: App, owners: tuple[str, ...]) -> None:
    """PER_OWNER failed jobs of each owner, written the way a worker writes them."""
    for owner in owners:
        app.enqueue_many([JobRequest("fail", args=[f"{owner}-{n}"], owner=owner) for n in range(PER_OWNER)])
    store = app.store
    while claimed := store.jobs_claim(queues=["default"], limit=1000, worker_id="test", lease_ttl=timedelta(minutes=5)):
        store.jobs_finish([FailNow(job.lease, "BAD_INPUT", "no") for job in claimed])


def _count(app: App, status: Status, owner: str | None = None) -> int:
    return sum(1 for _ in _every(app, status, owner))


def _every(app: App, status: Status, owner: str | None):
    admin, after = app.admin(Actor.operator("test")), None
    while True:
        page = admin.jobs(status=status, owner=owner, after=after, limit=1000)
        yield from page.items
        if page.next_cursor is None:
            return
        after = page.next_cursor


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_bulk_retry_of_5000_failed_jobs_by_filter_acts_per_owner_and_leaves_one_audit_entry(pg_url: str) -> None:
    app = make_app(pg_url)
    _fail_all(app, ("alice", "bob"))
    with serving(create_api(app, auth=TokenAuth(parse_tokens(SPECS)))) as url:
        alice, ops = as_("alice", url), as_("operator", url)
        for caller in (alice, ops):
            caller.timeout = httpx.Timeout(180)  # one call retries 2,500 jobs: seconds, more on a loaded machine
        wanted = {"action": "retry", "filter": {"task": "fail", "status": ["failed"]}}
        # A dry run counts and changes nothing
        dry = ops.post("/api/v1/jobs/bulk", json={**wanted, "dry_run": True})
        assert dry.status_code == 200, dry.text
        assert dry.json() == {"action": "retry", "matched": 5000, "done": 0, "skipped": 0, "dry_run": True}
        assert _count(app, Status.FAILED) == 5000
        # As alice: hers, and only hers, are queued again; asking for bob's is refused
        mine = alice.post("/api/v1/jobs/bulk", json=wanted)
        assert mine.json() == {"action": "retry", "matched": 2500, "done": 2500, "skipped": 0, "dry_run": False}
        assert (_count(app, Status.QUEUED, "alice"), _count(app, Status.FAILED, "bob")) == (2500, 2500)
        theirs = alice.post("/api/v1/jobs/bulk", json={**wanted, "filter": {"owner": "bob"}})
        assert theirs.status_code == 403 and theirs.json()["error"]["code"] == "FORBIDDEN"
        assert _count(app, Status.FAILED, "bob") == 2500
        # As the operator: every failed one left, bob's
        every = ops.post("/api/v1/jobs/bulk", json=wanted)
        assert every.json()["done"] == 2500 and _count(app, Status.FAILED) == 0
        assert _count(app, Status.QUEUED) == 5000
        # One entry per action, with its filter and count; the dry run left none
        trail = ops.get("/api/v1/audit").json()["items"]
        bulk = [(e["by"], e["detail"]["count"], e["detail"]["filter"]) for e in trail if e["action"] == "bulk_retry"]
        assert bulk == [("owner:alice", 2500, {"statuses": ["failed"], "task": "fail", "owner": "alice"}),
                        ("ops", 2500, {"statuses": ["failed"], "task": "fail"})]
        assert alice.get("/api/v1/audit").status_code == 403
    record("bulk retry by filter (PostgreSQL)", "failed jobs queued again by operator and owner", 5000, "5000")
    app.close()


def test_bulk_cancel_from_the_command_line_with_a_dry_run_first(pg_url: str) -> None:
    app = make_app(pg_url)
    app.enqueue_many([JobRequest("greet", args=[str(n)], queue="email") for n in range(30)]
                     + [JobRequest("greet", args=["other"], queue="reports")])

    def redrive(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "redrive", *args, "--database-url", pg_url],
                              cwd=REPO, capture_output=True, text=True, timeout=60)

    dry = redrive("jobs", "cancel", "--queue", "email", "--status", "queued", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.strip() == "30 jobs match: nothing cancelled (--dry-run)"
    assert _count(app, Status.QUEUED) == 31
    done = redrive("jobs", "cancel", "--queue", "email", "--status", "queued")
    assert done.returncode == 0 and done.stdout.strip() == "cancelled 30 jobs"
    assert (_count(app, Status.CANCELLED), _count(app, Status.QUEUED)) == (30, 1)
    neither = redrive("jobs", "cancel")
    assert neither.returncode == 2 and neither.stderr.strip().endswith(
        "give a job id, or a filter for every job it matches (--task, --queue, --status, --error-code, --since)")
    wrong = redrive("jobs", "retry", "--status", "queued")
    assert wrong.returncode == 2 and "invalid choice: 'queued'" in wrong.stderr
    app.close()


def test_revealing_a_jobs_arguments_is_for_operators_and_goes_on_its_audit_trail(api_app: App) -> None:
    from tests.http.conftest import TOKENS

    secret = "card 4111111111111111"
    job = api_app.enqueue("greet", args=[secret], owner="alice").job
    with serving(create_api(api_app, auth=TokenAuth(parse_tokens(SPECS)))) as url:
        ops, viewer, alice = as_("operator", url), as_("viewer", url), as_("alice", url)
        assert secret not in ops.get(f"/api/v1/jobs/{job.id}").text  # redacted when merely read
        shown = ops.post(f"/api/v1/jobs/{job.id}/reveal")
        assert shown.status_code == 200 and shown.json()["args"] == [secret]
        for refused, code in ((viewer, 403), (alice, 403), (as_(None, url), 401)):
            answer = refused.post(f"/api/v1/jobs/{job.id}/reveal")
            assert answer.status_code == code and secret not in answer.text
        assert TOKENS["operator"] not in shown.text
    trail = api_app.admin(Actor.operator("test")).audit_trail(job.id)
    assert [(e.by, e.action) for e in trail] == [("ops", "reveal")]


def test_replaying_every_open_dead_letter_a_filter_matches(pg_url: str) -> None:
    app = make_app(pg_url)
    app.enqueue_many([JobRequest("fail", args=[str(n)]) for n in range(20)]
                     + [JobRequest("greet", args=[str(n)]) for n in range(10)])
    claimed = app.store.jobs_claim(queues=["default"], limit=100, worker_id="t", lease_ttl=timedelta(minutes=5))
    app.store.jobs_finish([FailNow(job.lease, "BAD_INPUT", "no") for job in claimed])
    ops = app.admin(Actor.operator("test"))
    with serving(create_api(app, auth=TokenAuth(parse_tokens(SPECS)))) as url:
        client = as_("operator", url)
        wanted = {"action": "replay", "filter": {"task": "fail", "error_class": "BAD_INPUT"}}
        dry = client.post("/api/v1/dead-letters/bulk", json={**wanted, "dry_run": True})
        assert dry.json() == {"action": "replay", "matched": 20, "done": 0, "skipped": 0, "dry_run": True}
        assert ops.dead_letter_facets(state="open").total == 30
        done = client.post("/api/v1/dead-letters/bulk", json=wanted)
        assert done.json()["done"] == 20 and _count(app, Status.QUEUED) == 20
        assert as_("alice", url).post("/api/v1/dead-letters/bulk", json=wanted).status_code == 403
        assert as_("viewer", url).post("/api/v1/dead-letters/bulk", json=wanted).status_code == 403

    def redrive(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "redrive", "dead", "replay", *args, "--database-url", pg_url],
                              cwd=REPO, capture_output=True, text=True, timeout=60)

    counted = redrive("--task", "greet", "--dry-run")
    assert counted.stdout.strip() == "10 open dead letters match: nothing replayed (--dry-run)", counted.stderr
    replayed = redrive("--task", "greet")
    assert replayed.stdout.strip() == "replayed 10 dead letters"
    assert ops.dead_letter_facets(state="open").total == 0 and _count(app, Status.QUEUED) == 30
    entries = [(e.action, e.detail["count"], e.detail["filter"]) for e in ops.audit_trail()]
    assert entries == [("bulk_replay", 20, {"state": "open", "task": "fail", "error_class": "BAD_INPUT"}),
                       ("bulk_replay", 10, {"state": "open", "task": "greet"})]
    assert redrive("1", "--task", "greet").returncode == 2
    app.close()


def test_resolving_dead_letters_one_by_one_and_every_one_a_filter_matches(pg_url: str) -> None:
    app = make_app(pg_url)
    app.enqueue_many([JobRequest("fail", args=[str(n)], owner="ann" if n % 2 else "bob") for n in range(12)]
                     + [JobRequest("greet", args=[str(n)]) for n in range(3)])
    claimed = app.store.jobs_claim(queues=["default"], limit=100, worker_id="t", lease_ttl=timedelta(minutes=5))
    app.store.jobs_finish([FailNow(job.lease, "BAD_INPUT", "no") for job in claimed])
    resolved: list[tuple[int, str | None]] = []
    app.events.subscribe(lambda e: resolved.append((e.data["dead_letter_id"], e.data["by"])), names=["job.resolved"])
    ops = app.admin(Actor.operator("test"))
    greet = [d.id for d in ops.dead_letters(task="greet").items]
    with serving(create_api(app, auth=TokenAuth(parse_tokens(SPECS)))) as url:
        client = as_("operator", url)
        # One by one, with a note; a second resolve and a replay of it change nothing
        one = client.post("/api/v1/dead-letters/resolve", json={"ids": greet[:1], "note": "sent by hand"})
        (letter,) = one.json()["items"]
        assert (letter["state"], letter["resolved_by"], letter["notes"][0]["text"]) == ("resolved", "ops", "sent by hand")
        again = client.post("/api/v1/dead-letters/resolve", json={"ids": greet[:2]}).json()["items"]
        assert [d["state"] for d in again] == ["resolved", "resolved"]
        assert again[0]["notes"] == letter["notes"]  # the first kept its one note, not a second
        replay = client.post("/api/v1/dead-letters/replay", json={"ids": greet[:1]}).json()["items"][0]
        assert replay["job"] is None and replay["dead_letter"]["state"] == "resolved"
        # Mistakes are refused whole: an unknown id, an option of the other action, a viewer or an owner
        assert client.post("/api/v1/dead-letters/resolve", json={"ids": [greet[2], 999_999]}).status_code == 404
        assert ops.dead_letter(greet[2]).state == "open"
        mixed = client.post("/api/v1/dead-letters/bulk", json={"action": "resolve", "from_start": True})
        assert mixed.status_code == 422 and mixed.json()["error"]["code"] == "CONFIG_INVALID"
        assert client.post("/api/v1/dead-letters/bulk", json={"action": "replay", "note": "x"}).status_code == 422
        for who in ("viewer", "alice"):
            assert as_(who, url).post("/api/v1/dead-letters/resolve", json={"ids": greet[2:]}).status_code == 403
        # Every open letter of ann's: a dry run counts, the real one closes them with the note
        wanted = {"action": "resolve", "filter": {"task": "fail", "owner": "ann"}, "note": "customer refunded"}
        dry = client.post("/api/v1/dead-letters/bulk", json={**wanted, "dry_run": True})
        assert dry.json() == {"action": "resolve", "matched": 6, "done": 0, "skipped": 0, "dry_run": True}
        assert ops.dead_letter_facets(state="open").total == 13
        done = client.post("/api/v1/dead-letters/bulk", json=wanted)
        assert done.json() == {"action": "resolve", "matched": 6, "done": 6, "skipped": 0, "dry_run": False}
        anns = ops.dead_letters(task="fail", owner="ann").items
        assert {(d.state, d.resolved_by, d.notes[-1]["text"]) for d in anns} == {("resolved", "ops", "customer refunded")}
        assert ops.dead_letter_facets(state="open").total == 7 and ops.dead_letter_facets(state="resolved").total == 8
        listed = client.get("/api/v1/dead-letters", params={"state": "resolved", "limit": 100}).json()["items"]
        assert len(listed) == 8

    def redrive(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "redrive", "dead", "resolve", *args, "--database-url", pg_url],
                              cwd=REPO, capture_output=True, text=True, timeout=60)

    counted = redrive("--task", "fail", "--dry-run")
    assert counted.stdout.strip() == "6 open dead letters match: nothing resolved (--dry-run)", counted.stderr
    by_id = redrive(str(greet[2]), str(greet[0]), "--note", "done by hand")
    assert by_id.stdout.splitlines() == [f"dead letter {greet[2]}: resolved, job "
                                         f"{ops.dead_letter(greet[2]).job_id} will not run again",
                                         f"dead letter {greet[0]}: resolved already, nothing done"], by_id.stderr
    assert redrive("--task", "fail", "--note", "written off").stdout.strip() == "resolved 6 dead letters"
    assert ops.dead_letter_facets(state="open").total == 0
    assert redrive("--task", "fail").stdout.strip() == "resolved 0 dead letters"
    assert redrive().returncode == 2 and redrive("1", "--task", "x").returncode == 2
    # Each letter resolved in this process was told once (the command line's are told in its own); the
    # bulk resolves are on the audit trail, with the filter, the note and the count (a dry run is not)
    assert sorted(resolved) == sorted([(g, "ops") for g in greet[:2]] + [(d.id, "ops") for d in anns])
    entries = [(e.action, e.detail["count"], e.detail["filter"], e.detail.get("note")) for e in ops.audit_trail()]
    assert entries == [("bulk_resolve", 6, {"state": "open", "task": "fail", "owner": "ann"}, "customer refunded"),
                       ("bulk_resolve", 6, {"state": "open", "task": "fail"}, "written off"),
                       ("bulk_resolve", 0, {"state": "open", "task": "fail"}, None)]
    app.close()


def test_finished_jobs_are_deleted_one_or_by_filter_and_active_ones_are_refused(pg_url: str) -> None:
    app = make_app(pg_url)
    jobs = [app.enqueue("greet", args=[str(n)], owner="alice").job for n in range(10)]
    ops_admin = app.admin(Actor.operator("test"))
    for job in jobs[:6]:
        ops_admin.cancel(job.id)
    with serving(create_api(app, auth=TokenAuth(parse_tokens(SPECS)))) as url:
        alice, bob = as_("alice", url), as_("bob", url)
        assert alice.delete(f"/api/v1/jobs/{jobs[9].id}").status_code == 409  # still queued: cancel it first
        assert bob.delete(f"/api/v1/jobs/{jobs[0].id}").status_code == 403  # not bob's
        assert as_("viewer", url).delete(f"/api/v1/jobs/{jobs[0].id}").status_code == 403
        gone = alice.delete(f"/api/v1/jobs/{jobs[0].id}")
        assert gone.status_code == 204 and gone.content == b""
        assert alice.get(f"/api/v1/jobs/{jobs[0].id}").status_code == 404
        assert alice.delete(f"/api/v1/jobs/{jobs[0].id}").status_code == 404

    def redrive(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "redrive", "jobs", "delete", *args, "--database-url", pg_url],
                              cwd=REPO, capture_output=True, text=True, timeout=60)

    assert redrive("--status", "cancelled", "--dry-run").stdout.strip() == "5 jobs match: nothing deleted (--dry-run)"
    assert _count(app, Status.CANCELLED) == 5
    assert redrive("--status", "cancelled").stdout.strip() == "deleted 5 jobs"
    assert (_count(app, Status.CANCELLED), _count(app, Status.QUEUED)) == (0, 4)
    assert [(e.action, e.detail["count"]) for e in ops_admin.audit_trail()] == [("bulk_delete", 5)]
    assert [e.action for e in ops_admin.store.audits_list(job_id=jobs[0].id)] == ["delete"]
    app.close()


def test_since_is_counted_back_from_the_databases_clock_not_the_shells(faketime, pg_url: str) -> None:
    # A shell whose clock runs two hours ahead: "created in the last hour" still
    # finds the jobs just made, by the database's clock
    app = make_app(pg_url)
    app.enqueue_many([JobRequest("greet", args=[str(n)], queue="email") for n in range(3)])
    ahead = subprocess.run([*faketime("+2h"), sys.executable, "-m", "redrive", "jobs", "cancel",
                            "--queue", "email", "--since", "1h", "--dry-run", "--database-url", pg_url],
                           cwd=REPO, capture_output=True, text=True, timeout=60)
    assert ahead.returncode == 0 and ahead.stdout.strip() == "3 jobs match: nothing cancelled (--dry-run)", \
        (ahead.stdout, ahead.stderr)
    app.close()
