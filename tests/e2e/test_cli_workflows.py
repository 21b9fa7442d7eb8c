"""``redrive workflows list|show|cancel|retry`` from a database URL alone:
what each prints, an owner refused another's workflow, a wrong id one clean
line with its code."""

from __future__ import annotations

import json

from redrive import App, Permanent, Workflow
from redrive.testing import drain
from tests.e2e.cli import redrive
from tests.e2e.test_cli import assert_clean_error


def _blocked(url: str) -> str:
    """Alice's fan-out with one member failed for good: its join blocked."""
    app = App(url)

    @app.task
    def step(n: int) -> int:
        if n == 2:
            raise Permanent("two is not allowed", code="BAD_INPUT")
        return n

    wf = Workflow("digest", owner="alice")
    first = wf.add(step.call(1))
    fan = wf.map((step.call(n) for n in (2, 3)), name="fan", after=first)
    wf.add(step.call(4), name="join", after=fan)
    made = app.create_workflow(wf)
    drain(app)
    app.close()
    return str(made.id)


def test_list_show_retry_and_cancel_a_workflow(sqlite_url: str) -> None:
    flow = _blocked(sqlite_url)
    listed = redrive("workflows", "list", "--json", url=sqlite_url)
    assert listed.returncode == 0
    (shown,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (shown["id"], shown["status"], shown["counts"]) == (flow, "blocked",
                                                             {"blocked": 1, "failed": 1, "succeeded": 2})
    show = redrive("workflows", "show", flow, url=sqlite_url)
    assert show.returncode == 0 and "fan" in show.stdout and "1 failed, 1 succeeded" in show.stdout
    assert "join" in show.stdout and "after fan" in show.stdout
    assert_clean_error(redrive("workflows", "retry", flow, "--owner", "bob", url=sqlite_url), "FORBIDDEN",
                       "belongs to someone else")
    retried = redrive("workflows", "retry", flow, "--owner", "alice", url=sqlite_url)
    assert retried.returncode == 0 and retried.stdout.startswith("1 failed step queued again")
    cancelled = redrive("workflows", "cancel", flow, url=sqlite_url)
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout
    again = json.loads(redrive("workflows", "show", flow, "--json", url=sqlite_url).stdout)
    assert (again["status"], again["cancelled_by"] is not None) == ("cancelled", True)
    assert_clean_error(redrive("workflows", "show", "nope", url=sqlite_url), "WORKFLOW_NOT_FOUND", "not a workflow id")
