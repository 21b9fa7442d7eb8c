"""``/api/v1/workflows`` on a real app: an owner lists, reads, cancels and
retries their own workflows and gets 403 on another's, 404 (with the
redrive code) on an id that is none; a cancel ends the workflow cancelled;
a retry runs the failed step again and its dependents after it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from redrive import App, Workflow, spawn
from redrive.core.transitions import FailNow
from redrive.testing import drain
from tests.http.conftest import as_


def _blocked(app: App, owner: str) -> tuple[str, str]:
    """A chain of Alice's whose first step failed: the second is blocked."""
    greet = app.registry.task("greet")
    made = app.create_workflow(Workflow.chain("onboarding", [greet.call("a"), greet.call("b")], owner=owner))
    (first,) = app.store.jobs_claim(queues=["default"], limit=1, worker_id="w", lease_ttl=timedelta(minutes=1))
    app.store.jobs_finish([FailNow(first.lease, "NOT_FOUND", "no such user")])
    return str(made.id), str(made.steps["greet-2"][0])


def test_an_owner_reads_and_retries_their_workflow_and_no_one_elses(api: Any, api_app: App) -> None:
    flow, blocked = _blocked(api_app, "alice")
    alice, bob = as_("alice", api), as_("bob", api)
    listed = alice.get("/api/v1/workflows").json()["items"]
    assert [(w["id"], w["status"]) for w in listed] == [(flow, "blocked")]
    assert bob.get("/api/v1/workflows").json()["items"] == []
    shown = alice.get(f"/api/v1/workflows/{flow}").json()
    assert [s["name"] for s in shown["steps"]] == ["greet", "greet-2"]
    assert shown["steps"][1] == {"name": "greet-2", "after": [{"step": "greet", "policy": "succeeded"}],
                                 "counts": {"blocked": 1}}
    refused = bob.post(f"/api/v1/workflows/{flow}/retry")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "FORBIDDEN"
    retried = alice.post(f"/api/v1/workflows/{flow}/retry")
    assert retried.status_code == 200 and [j["args"] for j in retried.json()["items"]] == [["a"]]
    assert api_app.store.job_get(job_id=UUID(blocked)).status == "pending"
    drain(api_app)
    assert alice.get(f"/api/v1/workflows/{flow}").json()["status"] == "succeeded"


def test_a_cancel_ends_the_workflow_and_a_wrong_id_is_a_404(api: Any, api_app: App) -> None:
    flow, _ = _blocked(api_app, "alice")
    ops = as_("operator", api)
    cancelled = ops.post(f"/api/v1/workflows/{flow}/cancel")
    assert cancelled.status_code == 200
    assert (cancelled.json()["status"], cancelled.json()["cancelled_by"]) == ("cancelled", "ops")
    for wrong in ("not-an-id", "00000000-0000-0000-0000-000000000000"):
        missing = ops.get(f"/api/v1/workflows/{wrong}")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "WORKFLOW_NOT_FOUND", missing.text
    assert as_("viewer", api).post(f"/api/v1/workflows/{flow}/retry").status_code == 403


def test_a_spawned_workflow_names_the_job_that_spawned_it_and_its_page_links_there(api: Any, api_app: App) -> None:
    greet = api_app.registry.task("greet")

    @api_app.task
    def fan_out() -> None:
        kids = Workflow("kids")
        kids.map([greet.call("x"), greet.call("y")], name="greet")
        spawn(kids)

    job = fan_out.options(owner="alice").enqueue().job
    drain(api_app)
    alice = as_("alice", api)
    (listed,) = alice.get("/api/v1/workflows").json()["items"]
    assert (listed["spawned_by"], listed["owner"], listed["status"]) == (str(job.id), "alice", "succeeded")
    page = alice.get(f"/workflows/{listed['id']}")
    assert page.status_code == 200 and f'href="/jobs/{job.id}" data-spawned-by' in page.text


def test_workflows_come_a_page_at_a_time_and_a_bad_cursor_is_refused(api: Any, api_app: App) -> None:
    greet = api_app.registry.task("greet")
    made = [str(api_app.create_workflow(Workflow.chain(f"w{n}", [greet.call("x")], owner="alice")).id)
            for n in range(3)]
    alice = as_("alice", api)
    first = alice.get("/api/v1/workflows", params={"limit": 2}).json()
    assert [w["id"] for w in first["items"]] == made[:0:-1] and first["more"]
    rest = alice.get("/api/v1/workflows", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [w["id"] for w in rest["items"]] == [made[0]] and not rest["more"] and rest["next_cursor"] is None
    bad = alice.get("/api/v1/workflows", params={"cursor": "not-a-cursor"})
    assert bad.status_code == 422 and bad.json()["error"] == {
        "code": "CONFIG_INVALID", "message": "that cursor is not one this list gave out"}
