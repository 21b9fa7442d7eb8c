"""``redrive workflows list|show|cancel|retry``: workflows as an operator
(or, with ``--owner``, their owner) sees and acts on them."""

from __future__ import annotations

import argparse
import json

from redrive import views
from redrive.cli import render
from redrive.cli.load import admin_of
from redrive.cli.parsing import Commands
from redrive.core.workflow import WorkflowState


def add_commands(cli: Commands) -> None:
    workflows = cli.group("workflows", "List, inspect, cancel and retry workflows.")
    listing = cli.command("list", _list, "List the newest workflows, newest first.", workflows)
    listing.add_argument("--owner", help="only this user's")
    listing.add_argument("--limit", type=int, default=50, help="how many (default 50)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    show = cli.command("show", _show, "Show a workflow: its status and each step's jobs by status.", workflows)
    show.add_argument("workflow_id")
    show.add_argument("--json", action="store_true")
    cancel = cli.command("cancel", _cancel, "Cancel a workflow: nothing in it starts afterwards; its waiting "
                         "steps end now and its running ones are asked to stop.", workflows)
    retry = cli.command("retry", _retry, "Retry every failed step of a workflow: the steps it blocked "
                        "run after it, and nothing that succeeded runs again.", workflows)
    for acting, verb in ((cancel, "cancelling"), (retry, "retrying")):
        acting.add_argument("workflow_id")
        acting.add_argument("--owner", help="act for this user: only their workflows")
        acting.add_argument("--by", help=f"who is {verb}, for the record (default: your login)")


def _list(args: argparse.Namespace) -> int:
    with admin_of(args, owner=args.owner) as admin:
        found = admin.workflows(owner=args.owner, limit=args.limit)
    if args.json:
        render.json_lines(views.workflow_view(w) for w in found)
        return 0
    print(f"{'id':36}  {'name':20}  {'status':9}  {'owner':12}  {'created (UTC)':19}  steps")
    for w in found:
        print(f"{w.id!s:36}  {w.name[:20]:20}  {w.status.value:9}  {(w.owner or '-')[:12]:12}  "
              f"{render.when(w.created_at)}  {_counts(w)}")
    return 0


def _counts(workflow: WorkflowState) -> str:
    return ", ".join(f"{n} {status.value}" for status, n in sorted(workflow.totals.items()) if n)


def _show(args: argparse.Namespace) -> int:
    with admin_of(args) as admin:
        workflow = admin.workflow(args.workflow_id)
    shown = views.workflow_view(workflow)
    if args.json:
        print(json.dumps(shown))
        return 0
    render.record({k: v for k, v in shown.items() if k not in ("steps", "counts")})
    print("steps:")
    for step in shown["steps"]:
        after = ", ".join(f"{e['step']}" + ("" if e["policy"] == "succeeded" else f" ({e['policy']})")
                          for e in step["after"])
        counts = ", ".join(f"{n} {s}" for s, n in step["counts"].items())
        print(f"  {step['name']:24} {counts or '-':40} {'after ' + after if after else ''}")
    return 0


def _cancel(args: argparse.Namespace) -> int:
    with admin_of(args, owner=args.owner) as admin:
        workflow = admin.cancel_workflow(args.workflow_id)
    print(f"{workflow.id} cancelled ({_counts(workflow)})")
    return 0


def _retry(args: argparse.Namespace) -> int:
    with admin_of(args, owner=args.owner) as admin:
        retried = admin.retry_workflow(args.workflow_id)
    print(f"{len(retried)} failed step{'s' if len(retried) != 1 else ''} queued again"
          + "".join(f"\n  {job.id}  {job.task}" for job in retried))
    return 0
