"""What a workflow's endings tell, on SQLite and PostgreSQL: the step whose
failure blocks steps after it announces ``workflow.blocked`` once, the
ending of a workflow's last step announces how it ended once; on-call hears
of a blocked and of a failed workflow on a local Slack webhook, with a link
to its page; the metrics count them; and the testing kit asserts what a
workflow created, saying what it found when it is not what was expected."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from redrive import Actor, After, App, Permanent, Workflow
from redrive.metrics import Metrics
from redrive.notify import Notifications, Slack
from redrive.testing import assert_workflow, drain, workflow_jobs
from tests.fakes.slack import slack_webhook


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: Any, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'redrive.db'}"
    return request.getfixturevalue("pg_url")


def _ended(metrics: Metrics) -> dict[tuple[str, str], float]:
    found = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            if sample.name in ("redrive_workflows_ended_total", "redrive_workflow_steps_blocked_total"):
                found[sample.name, sample.labels.get("outcome", "")] = sample.value
    return found


def test_a_blocked_and_a_failed_workflow_are_told_once_each_and_counted(url: str) -> None:
    app, broken = App(url), {"import"}

    @app.task(max_attempts=1)
    def step(name: str) -> str:
        if name in broken:
            raise Permanent(f"{name} is broken", code="BAD_INPUT")
        return name

    heard: list[tuple[str, str, int]] = []
    app.events.subscribe(lambda e: heard.append((e.name, e.workflow, getattr(e, "blocked", 0))),
                         names=["workflow.succeeded", "workflow.failed", "workflow.cancelled", "workflow.blocked"])
    metrics = Metrics(app, gauges=False)
    with slack_webhook() as slack:
        Notifications(app, [Slack(slack.url)], base_url="https://ops.example.com/redrive")
        onboarding = app.create_workflow(Workflow.chain("onboarding", [step.call(n) for n in ("import", "mail", "log")]))
        nightly = Workflow("nightly")
        load = nightly.add(step.call("import"), name="load")
        nightly.add(step.call("report"), name="report", after=After(load, "ended"))  # a finally step
        drain(app)
        assert sorted(heard) == [("workflow.blocked", "onboarding", 1)]
        created = app.create_workflow(nightly)
        drain(app)
        assert sorted(heard) == [("workflow.blocked", "onboarding", 1), ("workflow.failed", "nightly", 0)]
        broken.clear()
        assert len(app.admin(Actor.operator("ops")).retry_workflow(onboarding.id)) == 1
        drain(app)
        assert heard[-1] == ("workflow.succeeded", "onboarding", 0) and len(heard) == 3
        told = [m for m in slack.messages if m.startswith("*Workflow")]
        assert len(told) == 2, slack.messages
        (blocked,) = [m for m in told if "onboarding" in m]
        (failed,) = [m for m in told if "nightly" in m]
        assert "Workflow onboarding is blocked" in blocked and "BAD_INPUT" in blocked
        assert f"redrive workflows retry {onboarding.id}" in blocked
        assert "Workflow nightly failed" in failed and f"https://ops.example.com/redrive/workflows/{created.id}" in failed
        assert "a step failed for good: step" in failed and "BAD_INPUT: import is broken" in failed
    assert _ended(metrics) == {("redrive_workflows_ended_total", "failed"): 1.0,
                               ("redrive_workflows_ended_total", "succeeded"): 1.0,
                               ("redrive_workflow_steps_blocked_total", ""): 1.0}
    # the kit: what the workflows created, and what it says when that is not what was expected
    assert_workflow(app, name="onboarding", status="succeeded", steps={"step": 1, "step-2": 1, "step-3": 1})
    assert [j.args for j in workflow_jobs(app, created)["report"]] == [["report"]]
    with pytest.raises(AssertionError, match="workflow 'nightly' is failed, not succeeded; its steps: load: 1 failed"):
        assert_workflow(app, name="nightly", status="succeeded")
    with pytest.raises(AssertionError, match=r"expected one workflow named 'weekly', found 0; workflows created: "
                                             r"'onboarding' \(succeeded\); 'nightly' \(failed\)"):
        assert_workflow(app, name="weekly")
    app.close()


def test_a_blocked_workflow_told_after_it_was_retried_still_names_the_failure(url: str) -> None:
    # The message is written when on-call's channel gets to it: an operator may
    # have retried the workflow by then, clearing the step's error from its row
    app, broken = App(url), {"import"}

    @app.task(max_attempts=1)
    def step(name: str) -> str:
        if name in broken:
            raise Permanent(f"{name} is broken", code="BAD_INPUT")
        return name

    onboarding = app.create_workflow(Workflow.chain("onboarding", [step.call(n) for n in ("import", "mail")]))
    drain(app)
    (failed,) = [j for jobs in workflow_jobs(app, onboarding.id).values() for j in jobs if j.status.value == "failed"]
    app.admin(Actor.operator("ops")).retry_workflow(onboarding.id)
    with slack_webhook() as slack:
        notifications = Notifications(app, [Slack(slack.url)], base_url="")
        message = notifications._workflow("onboarding", str(onboarding.id), "blocked", str(failed.id))
    assert "BAD_INPUT: import is broken" in message.body, message.body
