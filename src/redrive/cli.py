"""The ``redrive`` command: worker, migrate, enqueue, jobs, dead, breakers.

Every error redrive knows about ends as one line, ``redrive: error [CODE]:
message``, and exit status 2; never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import getpass
import importlib
import inspect
import json
import logging
import os
import signal
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from dotenv import find_dotenv, load_dotenv

from redrive import logs, signals, views
from redrive.admin import BULK_ACTIONS, Actor, Admin, Bulk
from redrive.app import App
from redrive.core.durations import parse_duration
from redrive.core.job import LETTER_STATES, Job
from redrive.core.redact import redact_text
from redrive.core.states import ACTIVE_ORDER, Status
from redrive.errors import ConfigError, RedriveError
from redrive.runtime.presence import installed_version
from redrive.settings import Settings
from redrive.store.reads import Page
from redrive.store.url import open_store

EXIT_ERROR = 2


def main(argv: Sequence[str] | None = None) -> int:
    signals.hold_stops()  # from the console script; `python -m redrive` held them earlier
    # A .env file where the command runs fills what the environment leaves out.
    load_dotenv(find_dotenv(usecwd=True), override=False)
    args = _parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # a supervisor starts its children with them
    if args.command not in ("worker", "serve"):
        signals.release_stops()
    if getattr(args, "app_path", None):  # `redrive worker myapp.tasks:app`
        args.app = args.app_path
    try:
        settings = Settings.load()  # every REDRIVE_ variable, checked before any work
        args.app = args.app or settings.app or None
        logs.configure(level=args.log_level, fmt=args.log_format or settings.log_format)
        return args.handler(args) or 0
    except RedriveError as exc:
        print(f"redrive: error [{exc.code}]: {redact_text(exc.message)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `redrive jobs list | head`: the reader left; that is not an error.
        sys.stderr.close()
        return 0


def _common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """Options every command takes, before or after its name: on the
    subcommands they default to nothing, so the top-level value stands."""
    unset = None if top else argparse.SUPPRESS
    parser.add_argument("--app", default=unset,
                        help="import path of your App, such as myapp.tasks:app, or myapp.tasks:make_app() "
                             "for a function that builds it: its tasks and its database (REDRIVE_APP)")
    parser.add_argument("--database-url", default=unset,
                        help="the database, over the app's and REDRIVE_DATABASE_URL")
    parser.add_argument("--log-level", default="info" if top else unset,
                        choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default=unset,
                        help="text (for a terminal) or json, one object per line (REDRIVE_LOG_FORMAT)")


class _Version(argparse.Action):
    """``--version``: the installed version is read only when asked (reading
    it cost every command about 20 ms)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **_: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show redrive's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"redrive {installed_version()}")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="redrive", description="A reliable background-job engine.")
    parser.add_argument("--version", action=_Version)
    _common(parser, top=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler: Any, help: str, under: Any = commands) -> argparse.ArgumentParser:
        sub = under.add_parser(name, help=help, description=help)
        _common(sub, top=False)
        sub.set_defaults(handler=handler)
        return sub

    def operator(name: str, handler: Any, help: str, under: Any = commands) -> argparse.ArgumentParser:
        """An operator verb: works from the database alone; ``--app`` adds the
        app's declarations (and its database, unless --database-url is given)."""
        return command(name, handler, help, under)

    def with_app(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("app_path", nargs="?", metavar="APP",
                         help="import path of your App, such as myapp.tasks:app, or myapp.tasks:make_app() for a function that builds it (or --app, REDRIVE_APP)")

    worker = command("worker", _worker, "Run a worker until SIGTERM or SIGINT.")
    with_app(worker)
    worker.add_argument("-q", "--queue", action="append", dest="queues", type=_queue_arg,
                        help="a queue to work, with its own limit of jobs at once if given: email or "
                             "email=5 (repeatable; default: default)")
    worker.add_argument("-c", "--concurrency", type=int, help="jobs at once (REDRIVE_WORKER_CONCURRENCY)")
    worker.add_argument("--lease-ttl", type=_seconds, help="such as 30s (REDRIVE_WORKER_LEASE_TTL)")
    worker.add_argument("--shutdown-grace", type=_seconds, help="such as 30s (REDRIVE_WORKER_SHUTDOWN_GRACE)")
    worker.add_argument("--poll-interval", type=_seconds, help="such as 1s (REDRIVE_WORKER_POLL_INTERVAL)")
    worker.add_argument("--schedules", action="store_true", help="also run the app's schedules")
    worker.add_argument("--retention", type=_seconds,
                        help="prune finished jobs older than this, such as 7d (REDRIVE_JOB_RETENTION)")
    worker.add_argument("--alerts", action="store_true",
                        help="evaluate the app's alert rules here (in one process only; docs/alerts.md)")
    worker.add_argument("--metrics-port", type=int,
                        help="serve Prometheus metrics at :PORT/metrics (needs redrive[metrics]; 0: any free port; with "
                             "--processes, the supervisor serves every process's)")
    worker.add_argument("--metrics-host", default="127.0.0.1",
                        help="the address metrics listen on (default 127.0.0.1)")
    worker.add_argument("--processes", type=int,
                        help="worker processes under one supervisor, each with its own --concurrency "
                             "(REDRIVE_WORKER_PROCESSES; default 1: this process works alone)")
    worker.add_argument("--max-jobs-per-child", type=int,
                        help="with --processes: replace a worker process once it has run this many jobs")
    worker.add_argument("--max-memory-per-child", type=_size, metavar="SIZE",
                        help="with --processes: replace a worker process once its resident memory passes "
                             "this, such as 500MB or 2GB")
    worker.add_argument("--worker-id", help=argparse.SUPPRESS)  # a supervisor names its children
    worker.add_argument("--max-jobs", type=int, help=argparse.SUPPRESS)  # and recycles them
    worker.add_argument("--max-memory", type=int, help=argparse.SUPPRESS)  # (bytes)
    worker.add_argument("--metrics-to-supervisor", action="store_true", help=argparse.SUPPRESS)  # its --metrics-port

    operator("migrate", _migrate, "Apply pending schema migrations.")

    prune = operator("prune", _prune, "Delete finished jobs older than an age, with their history.")
    prune.add_argument("--older-than", type=_seconds,
                       help="such as 30d; default REDRIVE_JOB_RETENTION (jobs with an open dead letter stay)")

    enqueue = command("enqueue", _enqueue, "Enqueue one job.")
    with_app(enqueue)
    enqueue.add_argument("task", help="the task's name")
    enqueue.add_argument("--args", type=_json_arg, default=[], help="a JSON array")
    enqueue.add_argument("--kwargs", type=_json_arg, default={}, help="a JSON object")
    enqueue.add_argument("--queue")
    enqueue.add_argument("--priority", type=int, help="lower runs first; default 0")
    when = enqueue.add_mutually_exclusive_group()
    when.add_argument("--delay", type=_seconds, help="seconds from now")
    when.add_argument("--run-at", type=_datetime_arg, help="ISO 8601 with a UTC offset")
    enqueue.add_argument("--owner")
    enqueue.add_argument("--max-attempts", type=int)
    enqueue.add_argument("--idempotency-key", help="repeating the same key returns the first job")
    enqueue.add_argument("--version", type=int, default=1, help="a higher version reruns under the same key")

    scheduler = command("scheduler", _scheduler, "Enqueue the app's schedules until SIGTERM or SIGINT.")
    with_app(scheduler)
    scheduler.add_argument("--interval", type=_seconds, default=timedelta(seconds=1),
                           help="seconds between ticks (default 1)")

    jobs = commands.add_parser("jobs", help="List and inspect jobs.")
    jobs_commands = jobs.add_subparsers(dest="jobs_command", required=True, metavar="COMMAND")
    listing = operator("list", _jobs_list, "List jobs, newest first.", jobs_commands)
    listing.add_argument("--status", action="append", choices=[s.value for s in Status])
    listing.add_argument("--queue")
    listing.add_argument("--task")
    listing.add_argument("--owner")
    listing.add_argument("--error-code")
    listing.add_argument("--idempotency-key")
    listing.add_argument("--limit", type=int, default=50, help="jobs per page (default 50)")
    listing.add_argument("--after", help="the cursor a previous page printed, for the next page")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    show = operator("show", _jobs_show, "Show one job, its events and who revealed its arguments.",
                    jobs_commands)
    show.add_argument("job_id")
    show.add_argument("--reveal", action="store_true",
                      help="show its original arguments, unredacted; this is recorded with your name (--by)")
    show.add_argument("--by", help="who is looking, for the record (default: your login)")
    show.add_argument("--json", action="store_true")
    retry = operator("retry", _jobs_retry, "Retry a failed job (fresh attempts, at the failed stage), or "
                     "every failed job a filter matches: redrive jobs retry --task X --since 1h.", jobs_commands)
    cancel = operator("cancel", _jobs_cancel, "Cancel a job: a waiting one at once, a running one by "
                      "its worker (an async task is cancelled; a sync one sees redrive.cancelled()); or every "
                      "job a filter matches: redrive jobs cancel --queue Q --status queued.", jobs_commands)
    delete = operator("delete", _jobs_delete, "Delete a finished job now, with its events, dead letters and "
                      "keys; or every finished job a filter matches: redrive jobs delete --status cancelled "
                      "--since 7d.", jobs_commands)
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
        filters.add_argument("--since", type=_seconds, help="created within this long: 1h, 30m, 7d")
        filters.add_argument("--dry-run", action="store_true", help="print how many match, change nothing")

    dead = commands.add_parser("dead", help="Triage, annotate, replay and resolve dead letters.")
    dead_commands = dead.add_subparsers(dest="dead_command", required=True, metavar="COMMAND")
    letters = operator("list", _dead_list, "List dead letters, newest first.", dead_commands)
    letters.add_argument("--error-class")
    letters.add_argument("--stage")
    letters.add_argument("--task")
    letters.add_argument("--owner")
    letters.add_argument("--state", choices=LETTER_STATES)
    letters.add_argument("--older-than", type=_seconds, help="seconds since the last failure")
    letters.add_argument("--newer-than", type=_seconds, help="seconds since the last failure")
    letters.add_argument("--limit", type=int, default=50, help="letters per page (default 50)")
    letters.add_argument("--after", help="the cursor a previous page printed, for the next page")
    letters.add_argument("--json", action="store_true", help="one JSON object per line")
    letter = operator("show", _dead_show, "Show one dead letter.", dead_commands)
    letter.add_argument("id")
    letter.add_argument("--json", action="store_true")
    note = operator("note", _dead_note, "Add a resolution note to a dead letter.", dead_commands)
    note.add_argument("id")
    note.add_argument("text")
    note.add_argument("--by", help="who writes the note (default: your login)")
    replay = operator("replay", _dead_replay,
                      "Replay dead letters: their jobs run again from the failed stage. Give ids, or a "
                      "filter for every open letter it matches: redrive dead replay --task X --dry-run.",
                      dead_commands)
    replay.add_argument("ids", nargs="*", metavar="id")
    replay.add_argument("--from-start", action="store_true", help="run every stage again")
    replay.add_argument("--by", help="who replays, for the record (default: your login)")
    resolve = operator("resolve", _dead_resolve,
                       "Resolve dead letters: close them without running their jobs again (handled by hand, "
                       "or not worth it). Give ids, or a filter for every open letter it matches: "
                       "redrive dead resolve --task X --note 'refunded by hand' --dry-run.", dead_commands)
    resolve.add_argument("ids", nargs="*", metavar="id")
    resolve.add_argument("--note", help="why, added to each letter as a note")
    resolve.add_argument("--by", help="who resolves, for the record (default: your login)")
    for chooser in (replay, resolve):
        matching = chooser.add_argument_group("every open letter that matches (in batches; one audit entry)")
        matching.add_argument("--error-class")
        matching.add_argument("--stage")
        matching.add_argument("--task")
        matching.add_argument("--owner", help="the job's owner")
        matching.add_argument("--older-than", type=_seconds, help="since the last failure: 1h, 7d")
        matching.add_argument("--newer-than", type=_seconds, help="since the last failure: 1h, 7d")
        matching.add_argument("--dry-run", action="store_true", help="print how many match, change nothing")

    breakers = commands.add_parser("breakers", help="See and force the shared circuit breakers.")
    breaker_commands = breakers.add_subparsers(dest="breakers_command", required=True, metavar="COMMAND")
    shown = operator("list", _breakers_list, "List breakers with their state and time spent open "
                     "(with --app, also the declared ones no job has used yet).", breaker_commands)
    shown.add_argument("--json", action="store_true", help="one JSON object per line")
    for name, handler, text in (
        ("open", _breakers_open, "Force a breaker open until it is closed by hand."),
        ("close", _breakers_close, "Close a breaker with a fresh window."),
    ):
        forced = operator(name, handler, text, breaker_commands)
        forced.add_argument("name", help="the dependency")
        forced.add_argument("--by", help="who does it, for the record (default: your login)")

    queues = operator("queues", _queues, "Count each queue's active jobs by state, with the oldest due job's "
                      "wait and whether it is paused; pause and resume queues.")
    queues.add_argument("--json", action="store_true", help="one JSON object per line")
    queue_commands = queues.add_subparsers(dest="queues_command", required=False, metavar="COMMAND")
    for name, handler, text in (
        ("pause", _queues_pause, "Pause a queue: no worker starts its jobs until it is resumed "
                                 "(running jobs go on)."),
        ("resume", _queues_resume, "Resume a paused queue."),
    ):
        control = operator(name, handler, text, queue_commands)
        control.add_argument("queue")
        control.add_argument("--by", help="who does it, for the record (default: your login)")

    workers = operator("workers", _workers, "List the worker processes: host, pid, queues, jobs running, "
                       "last heartbeat; stale ones (killed or cut off) are marked.")
    workers.add_argument("--json", action="store_true", help="one JSON object per line")

    check = operator("verify", _verify, "Check a deployment's database as redrive's fault tests do: worker "
                     "processes killed mid-drain, stale writes; on a scratch database it creates and drops, "
                     "never your jobs. Prints a table; exits 1 if a figure fails.")
    check.add_argument("--profile", choices=["quick", "full"], default="quick",
                       help="quick: 600 jobs, 20 kills (under a minute); full: 3,000 jobs, 60 kills")
    check.add_argument("--plant", choices=["lost", "double_terminal", "stale_write", "never_ran"],
                       help="plant one bug before the checks, to see its checker fire")

    serve = command("serve", _serve, "Serve the HTTP API under /api/v1 (needs redrive[web]); with no APP, "
                    "the operator views of any redrive database. Tokens: REDRIVE_API_TOKENS.")
    with_app(serve)
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="default 8000")
    serve.add_argument("--alerts", action="store_true",
                       help="evaluate the app's alert rules here (in one process only; docs/alerts.md)")
    return parser


# -- argument types ----------------------------------------------------------------


def _seconds(text: str) -> timedelta:
    """Seconds, or a number with a unit: 90, 90s, 15m, 12h, 7d."""
    try:
        return parse_duration(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "k": 2**10, "m": 2**20, "g": 2**30}


def _size(text: str) -> int:
    """A number of bytes: 500MB, 2GB, 512MiB, 300M (bytes when bare)."""
    number = text.strip().rstrip("BbIiKkMmGg")
    unit = text.strip()[len(number):].lower()
    try:
        size = float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: write it as 500MB, 2GB or 512MiB") from None
    if size < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a size must be above zero")
    return int(size)


def _queue_arg(text: str) -> tuple[str, int | None]:
    """``email`` or ``email=5``: a queue, and its own limit of jobs at once."""
    name, sep, limit = text.partition("=")
    if not sep:
        return name, None
    if not limit.isdigit() or int(limit) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: the limit after '=' must be a whole number of at least 1")
    return name, int(limit)


def _json_arg(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    except RecursionError:
        raise argparse.ArgumentTypeError("nested too deep to read") from None


def _datetime_arg(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 time") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError("give the time with a UTC offset, such as 2026-01-01T09:00+00:00")
    return value


# -- loading -----------------------------------------------------------------------


def load_app(path: str | None, database_url: str | None = None) -> App:
    """``package.module:app``, or ``package.module:make_app()`` for an app a
    function builds (called with no arguments, as uvicorn's ``--factory``)."""
    if not path:
        raise ConfigError("this command needs your app: redrive COMMAND myapp.tasks:app, --app, or REDRIVE_APP")
    module_name, _, attr = path.partition(":")
    factory = attr.endswith("()")
    attr = attr.removesuffix("()")
    if not module_name or not attr.isidentifier():
        raise ConfigError(f"the app path {path!r} must look like package.module:app or package.module:make_app()")
    # Like uvicorn and celery: the current directory is importable.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r}: {exc}") from None
    found = getattr(module, attr, None)
    if factory:
        if not callable(found):
            raise ConfigError(f"{module_name}:{attr} is not a function that builds an app")
        try:
            inspect.signature(found).bind()
        except TypeError as exc:
            raise ConfigError(f"{module_name}:{attr}() must build the app with no arguments ({exc})") from None
        found = found()
    elif callable(found) and not isinstance(found, App):
        raise ConfigError(f"{path!r} is a function: to have redrive call it, write {module_name}:{attr}()")
    if not isinstance(found, App):
        raise ConfigError(f"{path!r} is not a redrive App" + (" (the function returned something else)" if factory
                                                                   else ""))
    if database_url:
        found.use_database(database_url)
    _lasting(found.settings.database_url)
    return found


def _store_url(args: argparse.Namespace) -> str:
    """The database an operator verb works on: --database-url, else the app's, else the environment's."""
    if args.database_url:
        return _lasting(args.database_url)
    if getattr(args, "app", None):
        with load_app(args.app) as app:
            return app.settings.database_url
    return _lasting(Settings.load().database_url)


def _lasting(url: str) -> str:
    """A command runs in a process of its own: a memory store would forget its work when it exits."""
    if url.split("://", 1)[0].lower() == "memory":
        raise ConfigError("memory:// lives only as long as one process; a command needs sqlite:/// or postgresql://")
    return url


@contextmanager
def _admin(args: argparse.Namespace, *, owner: str | None = None) -> Iterator[Admin]:
    """The operator API on the command's database, acting as the person at the
    terminal (``--by``), or for ``owner`` when one is given."""
    actor = Actor.acting_for(owner, name=_by(args)) if owner else Actor.operator(_by(args))
    if getattr(args, "app", None):
        with load_app(args.app, args.database_url) as app:
            yield app.admin(actor)
    else:
        with Admin.open(_store_url(args), actor=actor, settings=Settings.load()) as admin:
            yield admin


# -- commands ----------------------------------------------------------------------


def _worker(args: argparse.Namespace) -> int:
    from redrive.runtime.worker import Worker

    processes = Settings.load().worker_processes if args.processes is None else args.processes
    if processes < 1:
        raise ConfigError(f"--processes must be at least 1, not {processes}")
    if args.max_jobs_per_child is not None and (processes < 2 or args.max_jobs_per_child < 1):
        raise ConfigError("--max-jobs-per-child needs --processes (2 or more) and a number of at least 1")
    if args.max_memory_per_child is not None and processes < 2:
        raise ConfigError("--max-memory-per-child needs --processes (2 or more): a worker alone has nobody to "
                          "replace it")
    with load_app(args.app, args.database_url) as app:
        _ = app.store  # open now: a bad URL or an old schema is reported before any work
        logs.log_events(app)
        if processes > 1:
            return _supervise(app, args, processes)
        worker = Worker(
            app.client, queues=dict(args.queues or [("default", None)]), concurrency=args.concurrency,
            lease_ttl=args.lease_ttl, shutdown_grace=args.shutdown_grace, worker_id=args.worker_id,
            poll_interval=args.poll_interval, schedules=args.schedules, retention=args.retention,
            plugins=_plugins(app, args), max_jobs=args.max_jobs, max_memory=args.max_memory,
        )
        _collect_less()
        worker.run_until_stopped()
    return 0


# Python's cyclic garbage collector, in a worker process (this command's, or a
# supervisor's child running it): a collection of the young objects starts
# whenever 700 more have been made than freed, and every object alive then is
# scanned. A worker keeps hundreds of jobs in flight, each a few dozen
# objects (its task, coroutine, job, lease), so at 700 it collected hundreds
# of times a second and scanned that in-flight state each time, and the
# full collections that follow scanned everything the app and its imports
# built as well: a quarter of a no-op job's CPU (docs/performance.md).
_YOUNG_OBJECTS = 20_000


def _collect_less() -> None:
    """What the process built to start (modules, the app, the worker) lives
    as long as it does: frozen out of the collector, nothing scans it again.
    Young collections wait for more new objects than a busy worker keeps in
    flight. Cycles are still collected; only less often."""
    gc.freeze()
    young, *older = gc.get_threshold()
    gc.set_threshold(max(young, _YOUNG_OBJECTS), *older)


def _without(argv: list[str], *flags: str) -> list[str]:
    """``argv`` less each of ``flags`` and its value (``--flag N`` or ``--flag=N``)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in flags:
            skip = True
        elif not any(arg.startswith(f"{flag}=") for flag in flags):
            kept.append(arg)
    return kept


def _supervise(app: App, args: argparse.Namespace, processes: int) -> int:
    """``--processes N``: children running this same command as single workers."""
    from redrive.runtime.supervisor import Supervisor

    # --metrics-port is the supervisor's: one port for all, each child's counts sent to it
    endpoint = None
    if args.metrics_port is not None:
        from redrive.metrics import MetricsEndpoint

        endpoint = MetricsEndpoint(app, args.metrics_port, args.metrics_host, processes=True)
    argv = _without(args.argv, "--processes", "--max-jobs-per-child", "--max-memory-per-child", "--metrics-port",
                    "--metrics-host")
    if endpoint is not None:
        argv.append("--metrics-to-supervisor")
    if args.max_jobs_per_child is not None:
        argv += ["--max-jobs", str(args.max_jobs_per_child)]
    if args.max_memory_per_child is not None:
        argv += ["--max-memory", str(args.max_memory_per_child)]
    settings = app.client.settings
    stop_within = (args.shutdown_grace or settings.worker_shutdown_grace) + (args.lease_ttl or settings.worker_lease_ttl)
    supervisor = Supervisor(lambda worker_id: [sys.executable, "-m", "redrive", *argv, "--processes", "1",
                                               "--worker-id", worker_id],
                            processes=processes, store=lambda: app.store, events=app.events, registry=app.registry,
                            stop_within=stop_within, queues=[q for q, _ in args.queues or [("default", None)]],
                            counted=endpoint.tallies.reported if endpoint is not None and endpoint.tallies else None)
    # The endings it writes for dead children are told as any other's: a dead
    # letter notified (the notification job is a child's to send).
    notifications = _notifications(app)
    try:
        return supervisor.run()
    finally:
        if notifications is not None:
            notifications.flush()
        if endpoint is not None:
            endpoint.close()


def _plugins(app: App, args: argparse.Namespace) -> list[Any]:
    """What ``redrive worker``'s flags and environment run beside its jobs."""
    plugins: list[Any] = []
    notifications = _notifications(app)
    if notifications is not None:
        plugins.append(notifications)
    if args.metrics_port is not None:
        from redrive.metrics import MetricsEndpoint

        plugins.append(MetricsEndpoint(app, args.metrics_port, args.metrics_host))
    if args.metrics_to_supervisor:
        from redrive.metrics import MetricsToSupervisor

        plugins.append(MetricsToSupervisor(app))
    if args.alerts:
        plugins.append(_alerts(app, notifications))
    dsn = Settings.load().sentry_dsn
    if dsn:
        from redrive.sentry import SentryReports, start_sentry

        start_sentry(dsn)
        plugins.append(SentryReports(app))
    return plugins


def _alerts(app: App, notifications: Any) -> Any:
    from redrive.alerts import AlertEvaluator

    if not app.registry.alert_rules:
        raise ConfigError("--alerts: the app declares no alert rules (app.alert(...), docs/alerts.md)")
    return AlertEvaluator(app, notifications=notifications)


def _notifications(app: App) -> Any:
    """Slack and email notifications, when the environment configures a channel."""
    settings = Settings.load()
    if not (settings.slack_webhook_url or settings.smtp_host):
        return None
    from redrive.notify import Notifications

    found = Notifications.from_env(app)
    if found is not None:
        logging.getLogger("redrive.notify").info(
            "notifications on: %s", ", ".join(c.name for c in found.channels))
    return found


def _serve(args: argparse.Namespace) -> int:
    from redrive.http import TokenAuth, create_api, tokens_from_env

    tokens = tokens_from_env()
    if not tokens:
        raise ConfigError("no API tokens: set REDRIVE_API_TOKENS or REDRIVE_API_TOKENS_FILE (docs/http.md)")
    import uvicorn

    app = load_app(args.app, args.database_url) if args.app else App(_store_url(args))
    with app:
        _ = app.store  # open now: a bad URL or an old schema is reported before serving
        logs.log_events(app)
        notifications = _notifications(app)
        evaluator = _alerts(app, notifications) if args.alerts else None
        if evaluator is not None:
            evaluator.start()  # on a thread of its own: no worker runs here
        api = create_api(app, auth=TokenAuth(tokens))
        # uvicorn stops gracefully on SIGTERM/SIGINT, then raises the signal
        # again to the handler it found: a stop asked for is a clean exit (0).
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: None)
        # Our logging (redacted), not uvicorn's own configuration.
        uvicorn.run(api, host=args.host, port=args.port, log_config=None)
        if evaluator is not None:
            evaluator.stop()
    return 0


def _prune(args: argparse.Namespace) -> int:
    older_than = args.older_than or Settings.load().job_retention
    with _admin(args) as admin:
        pruned = admin.prune(older_than)
    print(f"pruned {pruned} finished job{'' if pruned == 1 else 's'}")
    return 0


def _migrate(args: argparse.Namespace) -> int:
    store = open_store(_store_url(args), check_schema=False, settings=Settings.load())
    try:
        applied = store.migrate()
    finally:
        store.close()
    print("schema is up to date" if not applied else f"applied migrations {applied}")
    return 0


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


def _scheduler(args: argparse.Namespace) -> int:
    from redrive.runtime.scheduler import Scheduler

    with load_app(args.app, args.database_url) as app:
        if not app.schedules:
            raise ConfigError(f"{args.app} declares no schedules (app.schedule(...))")
        scheduler = Scheduler(app.client, interval=args.interval)

        async def main() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, scheduler.stop)
            await scheduler.run()

        asyncio.run(main())
    return 0


def _jobs_list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        jobs = admin.jobs(status=args.status, queue=args.queue, task=args.task, owner=args.owner,
                          error_code=args.error_code, idempotency_key=args.idempotency_key,
                          after=args.after, limit=args.limit)
    if args.json:
        for job in jobs:
            print(json.dumps(views.job_view(job)))
    else:
        print(f"{'id':36}  {'task':20}  {'queue':10}  {'status':9}  {'tries':>5}  {'created (UTC)':19}  "
              f"{'took':>8}  error")
        for job in jobs:
            # the error only where the job ended in it: a success's last retry is history, not its state
            error = job.error_code if job.status is Status.FAILED else ""
            print(f"{job.id!s:36}  {job.task[:20]:20}  {job.queue[:10]:10}  {job.status.value:9}  "
                  f"{job.attempts:>2}/{job.max_attempts:<2}  {_when(job.created_at)}  {_took(job):>8}  {error}")
    _more(jobs)
    return 0


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _took(job: Job) -> str:
    """From its first start to its end (waits between retries included); - until it ends."""
    if job.started_at is None or job.finished_at is None:
        return "-"
    seconds = (job.finished_at - job.started_at).total_seconds()
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:.1f}s" if seconds < 600 else f"{seconds / 60:.0f}m"


def _more(page: Page[Any]) -> None:
    """A list is never cut silently: say how to get the next page (on stderr,
    so --json output stays one object per line)."""
    if page.next_cursor is not None:
        print(f"more: repeat with --after {page.next_cursor}", file=sys.stderr)


def _jobs_show(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        job = admin.reveal(args.job_id) if args.reveal else admin.job(args.job_id)
        events = admin.job_events(job.id)
        audit = admin.audit_trail(job.id)
    shown = views.job_view(job, reveal=args.reveal)
    if args.json:
        print(json.dumps({**shown, "events": [views.event_view(e) for e in events],
                          "audit": [views.audit_view(a) for a in audit]}))
        return 0
    _print_record(shown)
    print("events:")
    for e in events:
        meta = f" {json.dumps(e.meta)}" if e.meta else ""
        print(f"  {e.at.isoformat()}  {e.from_status or '-':9} -> {e.to_status:9} attempt {e.attempt}{meta}")
    if audit:
        print("audit:")
        for a in audit:
            print(f"  {a.at.isoformat()}  {a.by} {a.action}")
    return 0


def _print_record(record: Mapping[str, Any]) -> None:
    for name, value in record.items():
        if value is not None:
            print(f"{name:18} {json.dumps(value) if isinstance(value, (dict, list)) else value}")


def _by(args: argparse.Namespace) -> str:
    if getattr(args, "by", None):
        return args.by
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no login name in some containers
        return "cli"


def _jobs_cancel(args: argparse.Namespace) -> int:
    if _bulk_asked(args):
        return _jobs_bulk(args, "cancel")
    with _admin(args, owner=args.owner) as admin:
        job = admin.cancel(args.job_id)
    if job.status is Status.CANCELLED:
        print(f"{job.id} cancelled")
    else:
        print(f"{job.id} is running: its worker was asked to stop it (redrive jobs show {job.id} to follow)")
    return 0


def _jobs_retry(args: argparse.Namespace) -> int:
    if _bulk_asked(args):
        return _jobs_bulk(args, "retry")
    with _admin(args, owner=args.owner) as admin:
        job = admin.retry(args.job_id)
    print(f"{job.id} queued (manual retry {job.manual_retry_count}, resumes at {job.stage or 'the start'})")
    return 0


def _jobs_delete(args: argparse.Namespace) -> int:
    if _bulk_asked(args):
        return _jobs_bulk(args, "delete")
    with _admin(args, owner=args.owner) as admin:
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


def _jobs_bulk(args: argparse.Namespace, action: str) -> int:
    since = datetime.now(UTC) - args.since if args.since else None
    with _admin(args, owner=args.owner) as admin:
        done = admin.bulk(action, dry_run=args.dry_run, status=args.status, task=args.task, queue=args.queue,
                          error_code=args.error_code, created_after=since)
    verb = {"retry": "retried", "cancel": "cancelled", "delete": "deleted"}[action]
    if done.dry_run:
        print(f"{done.matched} job{'' if done.matched == 1 else 's'} match: nothing {verb} (--dry-run)")
    else:
        skipped = f" ({done.skipped} changed by someone else meanwhile, left alone)" if done.skipped else ""
        print(f"{verb} {done.done} job{'' if done.done == 1 else 's'}{skipped}")
    return 0


def _dead_list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        letters = admin.dead_letters(
            error_class=args.error_class, stage=args.stage, task=args.task, owner=args.owner,
            state=args.state, older_than=args.older_than, newer_than=args.newer_than,
            after=args.after, limit=args.limit,
        )
    if args.json:
        for d in letters:
            print(json.dumps(views.dead_letter_view(d)))
    else:
        print(f"{'id':>6}  {'task':20}  {'stage':10}  {'error_class':20}  {'state':9}  last failure")
        for d in letters:
            print(f"{d.id:>6}  {d.task[:20]:20}  {(d.stage or '-')[:10]:10}  {d.error_class[:20]:20}  "
                  f"{views.dead_letter_state(d):9}  {d.last_failure_at.isoformat(timespec='seconds')}")
    _more(letters)
    return 0


def _dead_show(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        letter = admin.dead_letter(args.id)
    shown = views.dead_letter_view(letter)
    if args.json:
        print(json.dumps(shown))
        return 0
    _print_record({k: v for k, v in shown.items() if k not in ("last_stack", "notes")})
    for n in letter.notes:
        print(f"note               {n['at']} {n['by'] or '-'}: {n['text']}")
    if letter.last_stack:
        print("last_stack:")
        print(letter.last_stack.rstrip())
    return 0


def _dead_note(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        letter = admin.note(args.id, args.text)
    print(f"dead letter {letter.id}: {len(letter.notes)} notes")
    return 0


_LETTER_FILTERS = ("error_class", "stage", "task", "owner", "older_than", "newer_than")


def _letters_chosen(args: argparse.Namespace) -> bool:
    """True when the command is for every open letter a filter matches, False
    for the ids given; one or the other, never both or neither."""
    filtered = any(getattr(args, name) for name in (*_LETTER_FILTERS, "dry_run"))
    if args.ids and filtered:
        raise ConfigError("give dead letter ids or a filter (--task, --error-class, --stage, ...), not both")
    if not args.ids and not filtered:
        raise ConfigError("give dead letter ids, or a filter for every open letter it matches "
                          "(--task, --error-class, --stage, --owner, --older-than, --newer-than)")
    return filtered


def _bulk_told(done: Bulk, verb: str) -> None:
    if done.dry_run:
        print(f"{done.matched} open dead letter{'' if done.matched == 1 else 's'} match: nothing {verb} "
              "(--dry-run)")
    else:
        skipped = f" ({done.skipped} closed by someone else meanwhile)" if done.skipped else ""
        print(f"{verb} {done.done} dead letter{'' if done.done == 1 else 's'}{skipped}")


def _dead_resolve(args: argparse.Namespace) -> int:
    matching = _letters_chosen(args)  # a usage mistake is told before the store is opened
    with _admin(args) as admin:
        if matching:
            _bulk_told(admin.resolve_matching(**{name: getattr(args, name) for name in _LETTER_FILTERS},
                                              note=args.note, dry_run=args.dry_run), "resolved")
            return 0
        for done in admin.resolve(args.ids, note=args.note):
            letter = done.letter
            if done.resolved:
                print(f"dead letter {letter.id}: resolved, job {letter.job_id} will not run again")
            else:
                print(f"dead letter {letter.id}: {letter.state} already, nothing done")
    return 0


def _dead_replay(args: argparse.Namespace) -> int:
    if _letters_chosen(args):
        with _admin(args) as admin:
            _bulk_told(admin.replay_matching(**{name: getattr(args, name) for name in _LETTER_FILTERS},
                                             from_start=args.from_start, dry_run=args.dry_run), "replayed")
        return 0
    with _admin(args) as admin:
        replays = admin.replay(args.ids, from_start=args.from_start)
    for r in replays:
        if r.job is not None:
            print(f"dead letter {r.letter.id}: job {r.job.id} queued at {r.job.stage or 'the start'}")
        else:
            print(f"dead letter {r.letter.id}: {r.letter.state} already, nothing done")
    return 0


def _breakers_list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        statuses = admin.breakers()
    if args.json:
        for status in statuses.values():
            print(json.dumps(views.breaker_view(status)))
        return 0
    print(f"{'name':24}  {'state':9}  {'failures':>8}  {'calls':>5}  open for")
    for status in statuses.values():
        row = views.breaker_view(status)
        state = f"{row['state']}{'*' if row['forced'] else ''}"
        print(f"{status.name[:24]:24}  {state:9}  {row['failure_percent']:>7}%  "
              f"{row['calls_in_window']:>5}  {row['seconds_open']:.1f}s")
    return 0


def _queues(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        queues = admin.queues()
    if args.json:
        for stats in queues:
            print(json.dumps(views.queue_view(stats)))
        return 0
    print(f"{'queue':24}  " + "  ".join(f"{s.value:>9}" for s in ACTIVE_ORDER) + "  oldest due  paused")
    for stats in queues:
        age = "-" if stats.oldest_due_age_s is None else f"{stats.oldest_due_age_s:.1f}s"
        counts = "  ".join(f"{stats.counts.get(s, 0):>9}" for s in ACTIVE_ORDER)
        paused = f"by {stats.paused_by}" if stats.paused_by else "-"
        print(f"{stats.queue[:24]:24}  {counts}  {age:>10}  {paused}")
    return 0


def _workers(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        found, now = admin.workers()
    shown = views.workers_view(found, now)
    if args.json:
        for view in shown:
            print(json.dumps(view))
        return 0
    if not shown:
        print("no workers registered")
        return 0
    print(f"{'worker':34}  {'pid':>7}  {'queues':16}  {'running':>10}  {'jobs run':>8}  {'memory':>8}  "
          f"{'heartbeat':>9}  version")
    untold: list[str] = []  # a supervisor's replacements, once its children are listed
    for w in shown:
        if not w["supervisor"]:
            _lines(untold)
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
        untold += [f"    replaced pid {r['pid']} at {r['at']}: {r['why']}" for r in w.get("replaced", [])[-3:]]
    _lines(untold)
    return 0


def _lines(lines: list[str]) -> None:
    for line in lines:
        print(line)


def _queues_pause(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        changed = admin.pause_queue(args.queue)
    print(f"queue {args.queue} paused: no worker starts its jobs until `redrive queues resume {args.queue}`"
          if changed else f"queue {args.queue} was already paused")
    return 0


def _queues_resume(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        changed = admin.resume_queue(args.queue)
    print(f"queue {args.queue} resumed" if changed else f"queue {args.queue} was not paused")
    return 0


def _breakers_force(args: argparse.Namespace, to_open: bool) -> int:
    with _admin(args) as admin:
        status = admin.open_breaker(args.name) if to_open else admin.close_breaker(args.name)
    print(f"breaker {status.name} is {status.state}")
    return 0


def _breakers_open(args: argparse.Namespace) -> int:
    return _breakers_force(args, to_open=True)


def _breakers_close(args: argparse.Namespace) -> int:
    return _breakers_force(args, to_open=False)


def _verify(args: argparse.Namespace) -> int:
    from redrive.verify import render, verify

    figures = verify(_store_url(args), profile=args.profile, plant=args.plant)
    print(render(figures))
    failed = [f.name for f in figures if not f.ok]
    if failed:
        print(f"redrive: verify failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
