"""``redrive enqueue`` and ``redrive jobs list|show|retry|cancel|delete``:
one job, or every job a filter matches."""

from __future__ import annotations

import argparse
import json

from redrive import views
from redrive.admin import BULK_ACTIONS
from redrive.cli import render
from redrive.cli.load import admin_of, load_app
from redrive.cli.parsing import Commands, datetime_arg, json_arg, seconds
from redrive.core.states import Status
from redrive.errors import ConfigError


def add_commands(cli: Commands) -> None:
    enqueue = cli.command("enqueue", _enqueue, "Enqueue one job.")
    cli.with_app(enqueue)
    enqueue.add_argument("task", help="the task's name")
    enqueue.add_argument("--args", type=json_arg, default=[], help="a JSON array")
    enqueue.add_argument("--kwargs", type=json_arg, default={}, help="a JSON object")
    enqueue.add_argument("--queue")
    enqueue.add_argument("--priority", type=int, help="lower runs first; default 0")
    when = enqueue.add_mutually_exclusive_group()
    when.add_argument("--delay", type=seconds, help="seconds from now")
    when.add_argument("--run-at", type=datetime_arg, help="ISO 8601 with a UTC offset")
    enqueue.add_argument("--owner")
    enqueue.add_argument("--max-attempts", type=int)
    enqueue.add_argument("--idempotency-key", help="repeating the same key returns the first job")
    enqueue.add_argument("--version", type=int, default=1, help="a higher version reruns under the same key")

    jobs = cli.group("jobs", "List and inspect jobs.")
    listing = cli.command("list", _list, "List jobs, newest first.", jobs)
    listing.add_argument("--status", action="append", choices=[s.value for s in Status])
    listing.add_argument("--queue")
    listing.add_argument("--task")
    listing.add_argument("--owner")
    listing.add_argument("--error-code")
    listing.add_argument("--idempotency-key")
    listing.add_argument("--limit", type=int, default=50, help="jobs per page (default 50)")
    listing.add_argument("--after", help="the cursor a previous page printed, for the next page")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    show = cli.command("show", _show, "Show one job, its events and who revealed its arguments.", jobs)
    show.add_argument("job_id")
    show.add_argument("--reveal", action="store_true",
                      help="show its original arguments, unredacted; this is recorded with your name (--by)")
    show.add_argument("--by", help="who is looking, for the record (default: your login)")
    show.add_argument("--json", action="store_true")
    retry = cli.command("retry", _retry, "Retry a failed job (fresh attempts, at the failed stage), or "
                        "every failed job a filter matches: redrive jobs retry --task X --since 1h.", jobs)
    cancel = cli.command("cancel", _cancel, "Cancel a job: a waiting one at once, a running one by "
                         "its worker (an async task is cancelled; a sync one sees redrive.cancelled()); or every "
                         "job a filter matches: redrive jobs cancel --queue Q --status queued.", jobs)
    delete = cli.command("delete", _delete, "Delete a finished job now, with its events, dead letters and "
                         "keys; or every finished job a filter matches: redrive jobs delete --status cancelled "
                         "--since 7d.", jobs)
    for acting, verb, statuses in ((retry, "retrying", BULK_ACTIONS["retry"]),
                                   (cancel, "cancelling", BULK_ACTIONS["cancel"]),
                                   (delete, "deleting", BULK_ACTIONS["delete"])):
        acting.add_argument("job_id", nargs="?", help="one job; or leave it out and give a filter")
        acting.add_argument("--owner", help="act for this user: only their jobs")
        acting.add_argument("--by", help=f"who is {verb}, for the record (default: your login)")
        filters = acting.add_argument_group("every job that matches (in batches; one audit entry)")
        filters.add_argument("--status", action="append", choices=[s.value for s in statuses])
        filters.add_argument("--task")
        filters.add_argument("--queue")
        filters.add_argument("--error-code")
        filters.add_argument("--since", type=seconds, help="created within this long: 1h, 30m, 7d")
        filters.add_argument("--dry-run", action="store_true", help="print how many match, change nothing")


def _enqueue(args: argparse.Namespace) -> int:
    if not isinstance(args.args, list):
        raise ConfigError("--args must be a JSON array")
    if not isinstance(args.kwargs, dict):
        raise ConfigError("--kwargs must be a JSON object")
    with load_app(args.app, args.database_url) as app:
        result = app.enqueue(
            args.task, args=args.args, kwargs=args.kwargs, queue=args.queue,
            priority=args.priority, delay=args.delay, run_at=args.run_at,
            owner=args.owner, max_attempts=args.max_attempts,
            idempotency_key=args.idempotency_key, version=args.version,
        )
    print(result.job.id if not result.duplicate else f"{result.job.id} (already enqueued: {result.job.status})")
    return 0


def _list(args: argparse.Namespace) -> int:
    with admin_of(args) as admin:
        jobs = admin.jobs(status=args.status, queue=args.queue, task=args.task, owner=args.owner,
                          error_code=args.error_code, idempotency_key=args.idempotency_key,
                          after=args.after, limit=args.limit)
    if args.json:
        render.json_lines(views.job_view(job) for job in jobs)
    else:
        print(f"{'id':36}  {'task':20}  {'queue':10}  {'status':9}  {'tries':>5}  {'created (UTC)':19}  "
              f"{'took':>8}  error")
        for job in jobs:
            # the error only where the job ended in it: a success's last retry is history, not its state
            error = job.error_code if job.status is Status.FAILED else ""
            print(f"{job.id!s:36}  {job.task[:20]:20}  {job.queue[:10]:10}  {job.status.value:9}  "
                  f"{job.attempts:>2}/{job.max_attempts:<2}  {render.when(job.created_at)}  "
                  f"{render.took(job):>8}  {error}")
    render.more(jobs)
    return 0


def _show(args: argparse.Namespace) -> int:
    with admin_of(args) as admin:
        job = admin.reveal(args.job_id) if args.reveal else admin.job(args.job_id)
        events = admin.job_events(job.id)
        audit = admin.audit_trail(job.id)
        progress = views.progress_view(admin.progress(job.id))
    shown = views.job_view(job, reveal=args.reveal)
    if args.json:
        print(json.dumps({**shown, "progress": progress, "events": [views.event_view(e) for e in events],
                          "audit": [views.audit_view(a) for a in audit]}))
        return 0
    render.record(shown)
    if progress is not None:
        said = [f"{progress['fraction']:.0%}" if progress["fraction"] is not None else "",
                f"{progress['done']} of {progress['total']}" if progress["total"] is not None else "",
                progress["note"] or ""]
        print(f"progress: {', '.join(p for p in said if p)} (at {progress['at']})")
    print("events:")
    for e in events:
        meta = f" {json.dumps(e.meta)}" if e.meta else ""
        print(f"  {e.at.isoformat()}  {e.from_status or '-':9} -> {e.to_status:9} attempt {e.attempt}{meta}")
    if audit:
        print("audit:")
        for a in audit:
            print(f"  {a.at.isoformat()}  {a.by} {a.action}")
    return 0


def _cancel(args: argparse.Namespace) -> int:
    if _bulk_asked(args):
        return _bulk(args, "cancel")
    with admin_of(args, owner=args.owner) as admin:
        job = admin.cancel(args.job_id)
    if job.status is Status.CANCELLED:
        print(f"{job.id} cancelled")
    else:
        print(f"{job.id} is running: its worker was asked to stop it (redrive jobs show {job.id} to follow)")
    return 0


def _retry(args: argparse.Namespace) -> int:
    if _bulk_asked(args):
        return _bulk(args, "retry")
    with admin_of(args, owner=args.owner) as admin:
        job = admin.retry(args.job_id)
    print(f"{job.id} queued (manual retry {job.manual_retry_count}, resumes at {job.stage or 'the start'})")
    return 0


def _delete(args: argparse.Namespace) -> int:
    if _bulk_asked(args):
        return _bulk(args, "delete")
    with admin_of(args, owner=args.owner) as admin:
        admin.delete(args.job_id)
    print(f"{args.job_id} deleted")
    return 0


def _bulk_asked(args: argparse.Namespace) -> bool:
    """A filter instead of one job id; neither, or both, is a mistake said in one line."""
    filtered = any(getattr(args, name) for name in ("status", "task", "queue", "error_code", "since", "dry_run"))
    if args.job_id and filtered:
        raise ConfigError("give a job id or a filter (--task, --queue, --status, --error-code, --since), not both")
    if not args.job_id and not filtered:
        raise ConfigError("give a job id, or a filter for every job it matches "
                          "(--task, --queue, --status, --error-code, --since)")
    return filtered


def _bulk(args: argparse.Namespace, action: str) -> int:
    with admin_of(args, owner=args.owner) as admin:
        since = admin.store.now() - args.since if args.since else None  # the database's clock, not this host's
        done = admin.bulk(action, dry_run=args.dry_run, status=args.status, task=args.task, queue=args.queue,
                          error_code=args.error_code, created_after=since)
    render.bulk_told(done, {"retry": "retried", "cancel": "cancelled", "delete": "deleted"}[action], "job")
    return 0
