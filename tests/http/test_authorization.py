"""Every route of the served OpenAPI document, called as three owners, an
operator, a read-only operator and nobody, on jobs of each owner in every state: no request
succeeds that its rule forbids, and every answer, allowed or refused, is one
its operation declares and validates against its schema with no property
the schema does not name. A route added without a rule here fails."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from redrive import Actor, App, Status, Workflow
from tests.figures import record
from tests.http.conftest import Conformance, as_
from tests.integration.test_worker_in_process import _run_until

OWNERS = ("alice", "bob", "carol")
CANARY = "canary-4111111111111111"  # in every owner's arguments: must never reach another owner

# (method, path) -> who may: "public", "operator", "owner" (any principal; owners
# for themselves), or "job" (the job's owner and operators).
RULES = {
    ("GET", "/healthz"): "public",
    ("GET", "/readyz"): "public",
    ("POST", "/api/v1/jobs"): "owner",
    ("POST", "/api/v1/jobs/batch"): "owner",
    ("GET", "/api/v1/jobs"): "owner",
    ("GET", "/api/v1/jobs/{job_id}"): "job",
    ("POST", "/api/v1/jobs/{job_id}/retry"): "job",
    ("POST", "/api/v1/jobs/{job_id}/cancel"): "job",
    ("POST", "/api/v1/jobs/{job_id}/reveal"): "operator",
    ("DELETE", "/api/v1/jobs/{job_id}"): "job",
    ("POST", "/api/v1/jobs/bulk"): "owner",  # on the caller's own jobs (tests/http/test_bulk.py)
    ("GET", "/api/v1/audit"): "operator",
    ("GET", "/api/v1/dead-letters"): "operator",
    ("GET", "/api/v1/dead-letters/facets"): "operator",
    ("GET", "/api/v1/dead-letters/{letter_id}"): "operator",
    ("POST", "/api/v1/dead-letters/{letter_id}/notes"): "operator",
    ("POST", "/api/v1/dead-letters/replay"): "operator",
    ("POST", "/api/v1/dead-letters/resolve"): "operator",
    ("POST", "/api/v1/dead-letters/bulk"): "operator",
    ("GET", "/api/v1/breakers"): "operator",
    ("GET", "/api/v1/breakers/{name}"): "operator",
    ("POST", "/api/v1/breakers/{name}/open"): "operator",
    ("POST", "/api/v1/breakers/{name}/close"): "operator",
    ("GET", "/api/v1/queues"): "operator",
    ("GET", "/api/v1/queues/throughput"): "operator",
    ("GET", "/api/v1/charts"): "operator",
    ("POST", "/api/v1/queues/{queue}/pause"): "operator",
    ("POST", "/api/v1/queues/{queue}/resume"): "operator",
    ("GET", "/api/v1/schedules"): "operator",
    ("POST", "/api/v1/schedules/{name}/pause"): "operator",
    ("POST", "/api/v1/schedules/{name}/resume"): "operator",
    ("POST", "/api/v1/schedules/{name}/run"): "operator",
    ("GET", "/api/v1/workers"): "operator",
    ("GET", "/api/v1/outbox"): "operator",
    ("GET", "/metrics"): "operator",
    ("GET", "/api/v1/workflows"): "owner",
    ("GET", "/api/v1/workflows/{workflow_id}"): "job",  # the workflow's owner and operators, as for a job
    ("POST", "/api/v1/workflows/{workflow_id}/cancel"): "job",
    ("POST", "/api/v1/workflows/{workflow_id}/retry"): "job",
}
BODIES = {
    "/api/v1/jobs": {"task": "greet", "args": ["x"]},
    "/api/v1/jobs/batch": {"jobs": [{"task": "greet", "args": ["x"]}]},
    "/api/v1/dead-letters/{letter_id}/notes": {"text": "looked at it"},
    "/api/v1/dead-letters/replay": {"ids": [1]},
    "/api/v1/dead-letters/resolve": {"ids": [1]},
    "/api/v1/jobs/bulk": {"action": "retry", "filter": {"task": "greet"}, "dry_run": True},
    "/api/v1/dead-letters/bulk": {"action": "replay", "filter": {"task": "fail"}, "dry_run": True},
}


def _jobs_in_every_state(app: App) -> dict[str, list[tuple[str, str]]]:
    """Per owner: (job id, state) for scheduled, queued, running, succeeded, failed, cancelled."""
    made: dict[str, list[tuple[str, str]]] = {}
    for owner in OWNERS:
        ids = {
            "succeeded": app.enqueue("greet", args=[CANARY], owner=owner).job.id,
            "failed": app.enqueue("fail", args=[CANARY], owner=owner).job.id,
        }
        made[owner] = [(str(i), s) for s, i in ids.items()]
    asyncio.run(_run_until(app, lambda: all(app.client.job(i).status in (Status.SUCCEEDED, Status.FAILED)
                                            for jobs in made.values() for i, _ in jobs)))
    for owner in OWNERS:
        running = app.enqueue("greet", args=[CANARY], owner=owner, queue=f"held-{owner}").job.id
        app.store.jobs_claim(queues=[f"held-{owner}"], limit=1, worker_id="test:1:x", lease_ttl=timedelta(hours=1))
        cancelled = app.enqueue("greet", args=[CANARY], owner=owner).job.id
        app.admin(Actor.operator("test")).cancel(cancelled)
        made[owner] += [
            (str(app.enqueue("greet", args=[CANARY], owner=owner, delay=timedelta(hours=1)).job.id), "scheduled"),
            (str(app.enqueue("greet", args=[CANARY], owner=owner, queue="idle").job.id), "queued"),
            (str(running), "running"), (str(cancelled), "cancelled"),
        ]
    return made


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_no_request_succeeds_that_its_rule_forbids(api, api_app: App) -> None:
    jobs = _jobs_in_every_state(api_app)
    greet = api_app.registry.task("greet")
    flows = {owner: [str(api_app.create_workflow(Workflow.chain("chain", [greet.call(CANARY), greet.call(CANARY)],
                                                                owner=owner)).id)] for owner in OWNERS}
    letter = api_app.admin(Actor.operator("test")).dead_letters().items[0].id
    spec = as_(None, api).get("/api/v1/openapi.json").json()
    served = {(method.upper(), path) for path, item in spec["paths"].items() for method in item}
    assert served == set(RULES), f"routes without a rule: {served - set(RULES)}; rules for no route: {set(RULES) - served}"
    conformance = Conformance(spec)
    assert not conformance.open_schemas, f"schemas that allow properties they do not name: {conformance.open_schemas}"

    tried, wrongly_allowed, wrong, leaks, nonconforming = 0, [], [], [], []
    callers = [*OWNERS, "operator", "viewer", None]
    # A delete goes last, and to each job its refused callers before the allowed ones: a
    # deleted job answers everyone 404 after.
    for (method, template), rule in sorted(RULES.items(), key=lambda kv: (kv[0][0] == "DELETE", kv[0])):
        targets = ([(owner, job_id) for owner in OWNERS for job_id, _ in jobs[owner]] if "{job_id}" in template
                   else [(owner, flow) for owner in OWNERS for flow in flows[owner]] if "{workflow_id}" in template
                   else [(None, None)])
        for job_owner, job_id in targets:
            path = (template.replace("{job_id}", job_id or "").replace("{workflow_id}", job_id or "")
                    .replace("{letter_id}", str(letter))
                    .replace("{name}", "mailer").replace("{queue}", "idle"))
            for caller in (sorted(callers, key=lambda c: c in (job_owner, "operator")) if method == "DELETE"
                           else callers):
                client = as_(caller, api)
                answer = client.request(method, path, json=BODIES.get(template))
                tried += 1
                if problem := conformance.problem(method, template, answer):
                    nonconforming.append((caller, method, path, answer.status_code, problem))
                allowed = (rule == "public" or (caller is not None and (
                    caller == "operator" or (caller == "viewer" and method == "GET")  # sees all, acts on nothing
                    or (caller != "viewer" and (rule == "owner" or (rule == "job" and caller == job_owner))))))
                if not allowed:
                    expected = 401 if caller is None else 403
                    if 200 <= answer.status_code < 300:
                        wrongly_allowed.append((caller, method, path, answer.status_code))
                    elif answer.status_code != expected:
                        wrong.append((caller, method, path, answer.status_code))
                    if CANARY in answer.text:
                        leaks.append((caller, method, path))
                elif answer.status_code in (401, 403):
                    wrong.append((caller, method, path, f"refused {answer.status_code}"))
                if caller in OWNERS and CANARY in answer.text and job_owner not in (None, caller):
                    leaks.append((caller, method, path))
    record("HTTP authorization matrix", "requests tried", tried)
    record("HTTP authorization matrix", "unauthorized successes", len(wrongly_allowed), "0")
    record("HTTP authorization matrix", "answers not matching their schema", len(nonconforming), "0")
    assert not wrongly_allowed, wrongly_allowed[:10]
    assert not wrong, wrong[:10]  # refused with the wrong status, or a permitted caller refused
    assert not leaks, leaks[:10]
    assert not nonconforming, nonconforming[:10]
