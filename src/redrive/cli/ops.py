"""The operator's other commands: ``redrive migrate``, ``prune``,
``queues`` (and pause/resume), ``workers``, ``breakers`` (list, open,
close) and ``verify``."""

from __future__ import annotations

import argparse
import sys

from redrive import views
from redrive.cli import render
from redrive.cli.load import admin_of, store_url
from redrive.cli.parsing import Commands, seconds
from redrive.core.states import ACTIVE_ORDER
from redrive.store.url import open_store


def add_commands(cli: Commands) -> None:
    cli.command("migrate", _migrate, "Apply pending schema migrations.")
    prune = cli.command("prune", _prune, "Delete finished jobs older than an age, with their history.")
    prune.add_argument("--older-than", type=seconds,
                       help="such as 30d; default REDRIVE_JOB_RETENTION (jobs with an open dead letter stay)")

    breakers = cli.group("breakers", "See and force the shared circuit breakers.")
    shown = cli.command("list", _breakers, "List breakers with their state and time spent open "
                        "(with --app, also the declared ones no job has used yet).", breakers)
    shown.add_argument("--json", action="store_true", help="one JSON object per line")
    for name, handler, text in (("open", _breaker_open, "Force a breaker open until it is closed by hand."),
                                ("close", _breaker_close, "Close a breaker with a fresh window.")):
        forced = cli.command(name, handler, text, breakers)
        forced.add_argument("name", help="the dependency")
        forced.add_argument("--by", help="who does it, for the record (default: your login)")

    queues = cli.command("queues", _queues, "Count each queue's active jobs by state, with the oldest due job's "
                         "wait and whether it is paused; pause and resume queues.")
    queues.add_argument("--json", action="store_true", help="one JSON object per line")
    controls = queues.add_subparsers(dest="queues_command", required=False, metavar="COMMAND")
    for name, handler, text in (("pause", _pause, "Pause a queue: no worker starts its jobs until it is resumed "
                                                  "(running jobs go on)."),
                                ("resume", _resume, "Resume a paused queue.")):
        control = cli.command(name, handler, text, controls)
        control.add_argument("queue")
        control.add_argument("--by", help="who does it, for the record (default: your login)")

    workers = cli.command("workers", _workers, "List the worker processes: host, pid, queues, jobs running, "
                          "last heartbeat; stale ones (killed or cut off) are marked.")
    workers.add_argument("--json", action="store_true", help="one JSON object per line")

    check = cli.command("verify", _verify, "Check a deployment's database as redrive's fault tests do: worker "
                        "processes killed mid-drain, stale writes; on a scratch database it creates and drops, "
                        "never your jobs. Prints a table; exits 1 if a figure fails.")
    check.add_argument("--profile", choices=["quick", "full"], default="quick",
                       help="quick: 600 jobs, 20 kills (under a minute); full: 3,000 jobs, 60 kills")
    check.add_argument("--plant", choices=["lost", "double_terminal", "stale_write", "never_ran", "join_twice",
                                           "join_never", "spawned_twice"],
                       help="plant one bug before the checks, to see its checker fire")


def _migrate(args: argparse.Namespace) -> int:
    store = open_store(store_url(args), check_schema=False, settings=args.settings)
    try:
        applied = store.migrate()
    finally:
        store.close()
    print("schema is up to date" if not applied else f"applied migrations {applied}")
    return 0


def _prune(args: argparse.Namespace) -> int:
    older_than = args.older_than or args.settings.job_retention
    with admin_of(args) as admin:
        pruned = admin.prune(older_than)
    print(f"pruned {pruned} finished job{'' if pruned == 1 else 's'}")
    return 0


def _breakers(args: argparse.Namespace) -> int:
    with admin_of(args) as admin:
        statuses = admin.breakers()
    if args.json:
        render.json_lines(views.breaker_view(status) for status in statuses.values())
        return 0
    print(f"{'name':24}  {'state':9}  {'failures':>8}  {'calls':>5}  open for")
    for status in statuses.values():
        row = views.breaker_view(status)
        state = f"{row['state']}{'*' if row['forced'] else ''}"
        print(f"{status.name[:24]:24}  {state:9}  {row['failure_percent']:>7}%  "
              f"{row['calls_in_window']:>5}  {row['seconds_open']:.1f}s")
    return 0


def _breaker_open(args: argparse.Namespace) -> int:
    with admin_of(args) as admin:
        status = admin.open_breaker(args.name)
    print(f"breaker {status.name} is {status.state}")
    return 0


def _breaker_close(args: argparse.Namespace) -> int:
    with admin_of(args) as admin:
        status = admin.close_breaker(args.name)
    print(f"breaker {status.name} is {status.state}")
    return 0


def _queues(args: argparse.Namespace) -> int:
    with admin_of(args) as admin:
        queues = admin.queues()
    if args.json:
        render.json_lines(views.queue_view(stats) for stats in queues)
        return 0
    print(f"{'queue':24}  " + "  ".join(f"{s.value:>9}" for s in ACTIVE_ORDER) + "  oldest due  paused")
    for stats in queues:
        age = "-" if stats.oldest_due_age_s is None else f"{stats.oldest_due_age_s:.1f}s"
        counts = "  ".join(f"{stats.counts.get(s, 0):>9}" for s in ACTIVE_ORDER)
        paused = f"by {stats.paused_by}" if stats.paused_by else "-"
        print(f"{stats.queue[:24]:24}  {counts}  {age:>10}  {paused}")
    return 0


def _pause(args: argparse.Namespace) -> int:
    with admin_of(args) as admin:
        changed = admin.pause_queue(args.queue)
    print(f"queue {args.queue} paused: no worker starts its jobs until `redrive queues resume {args.queue}`"
          if changed else f"queue {args.queue} was already paused")
    return 0


def _resume(args: argparse.Namespace) -> int:
    with admin_of(args) as admin:
        changed = admin.resume_queue(args.queue)
    print(f"queue {args.queue} resumed" if changed else f"queue {args.queue} was not paused")
    return 0


def _workers(args: argparse.Namespace) -> int:
    with admin_of(args) as admin:
        found, now = admin.workers()
    shown = views.workers_view(found, now)
    if args.json:
        render.json_lines(shown)
        return 0
    if not shown:
        print("no workers registered")
        return 0
    print(f"{'worker':34}  {'pid':>7}  {'queues':16}  {'running':>10}  {'jobs run':>8}  {'memory':>8}  "
          f"{'heartbeat':>9}  version")
    untold: list[str] = []  # a supervisor's replacements, once its children are listed
    for w in shown:
        if not w["supervisor"]:
            render.lines(untold)
            untold = []
        beat = f"{w['seconds_since_heartbeat']:.0f}s ago"
        state = "  STALE" if w["stale"] else ""
        if w["orphaned"]:
            state += f"  {w['orphaned']} ORPHANED THREADS"
        memory = f"{w['memory_bytes'] / 2**20:.0f} MiB" if w["memory_bytes"] is not None else "-"
        if w["kind"] == "supervisor":
            running, ran = f"{w['children']} procs", f"{w['restarts']} restart{'' if w['restarts'] == 1 else 's'}"
        else:
            running, ran = f"{w['running']} of {w['concurrency']}", str(w["jobs_run"])
        name = f"  {w['id']}" if w["supervisor"] else w["id"]
        print(f"{name[:34]:34}  {w['pid']:>7}  {','.join(w['queues'])[:16]:16}  {running:>10}  {ran:>8}  "
              f"{memory:>8}  {beat:>9}  {w['version']}{state}")
        untold += [f"    replaced pid {r['pid']} at {r['at']}: {r['why']}" for r in w["replaced"][-3:]]
    render.lines(untold)
    return 0


def _verify(args: argparse.Namespace) -> int:
    from redrive.verify import render as table
    from redrive.verify import verify

    figures = verify(store_url(args), profile=args.profile, plant=args.plant)
    print(table(figures))
    failed = [f.name for f in figures if not f.ok]
    if failed:
        print(f"redrive: verify failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
