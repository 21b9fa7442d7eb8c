"""The ``redrive`` command: worker, migrate, enqueue, jobs, demo.

Every error redrive knows about ends as one line, ``redrive: error [CODE]:
message``, and exit status 2; never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from datetime import datetime, timedelta
from typing import Any, Sequence

from redrive.app import App
from redrive.core.states import Status
from redrive.errors import ConfigError, RedriveError
from redrive.settings import Settings
from redrive.store.url import open_store

EXIT_ERROR = 2


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return args.handler(args) or 0
    except RedriveError as exc:
        print(f"redrive: error [{exc.code}]: {exc.message}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `redrive jobs list | head`: the reader left; that is not an error.
        sys.stderr.close()
        return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="redrive", description="A reliable background-job engine.")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler: Any, help: str, under: Any = commands) -> argparse.ArgumentParser:
        sub = under.add_parser(name, help=help, description=help)
        sub.add_argument("--database-url", help="overrides the app's and REDRIVE_DATABASE_URL")
        sub.set_defaults(handler=handler)
        return sub

    worker = command("worker", _worker, "Run a worker until SIGTERM or SIGINT.")
    worker.add_argument("app", help="import path of your App, such as myapp.tasks:app")
    worker.add_argument("-q", "--queue", action="append", dest="queues",
                        help="a queue to work (repeatable; default: default)")
    worker.add_argument("-c", "--concurrency", type=int, help="jobs at once (WORKER_CONCURRENCY)")
    worker.add_argument("--lease-ttl", type=_seconds, help="seconds (WORKER_LEASE_TTL_SEC)")
    worker.add_argument("--shutdown-grace", type=_seconds, help="seconds (WORKER_SHUTDOWN_GRACE_SEC)")
    worker.add_argument("--poll-interval", type=_seconds, help="seconds (WORKER_POLL_INTERVAL_SEC)")

    command("migrate", _migrate, "Apply pending schema migrations.")

    enqueue = command("enqueue", _enqueue, "Enqueue one job.")
    enqueue.add_argument("app", help="import path of your App, such as myapp.tasks:app")
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

    jobs = commands.add_parser("jobs", help="List and inspect jobs.")
    jobs_commands = jobs.add_subparsers(dest="jobs_command", required=True, metavar="COMMAND")
    listing = command("list", _jobs_list, "List jobs, newest first.", jobs_commands)
    listing.add_argument("--status", action="append", choices=[s.value for s in Status])
    listing.add_argument("--queue")
    listing.add_argument("--task")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    show = command("show", _jobs_show, "Show one job and its events.", jobs_commands)
    show.add_argument("job_id")
    show.add_argument("--json", action="store_true")

    demo = command("demo", _demo, "Run the demo: a worker draining jobs on SQLite.")
    demo.add_argument("--jobs", type=int, default=40)
    demo.add_argument("--concurrency", type=int, default=4)
    return parser


# -- argument types ----------------------------------------------------------------


def _seconds(text: str) -> timedelta:
    try:
        return timedelta(seconds=float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None


def _json_arg(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None


def _datetime_arg(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 time") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError("give the time with a UTC offset, such as 2026-01-01T09:00+00:00")
    return value


# -- loading -----------------------------------------------------------------------


def load_app(path: str, database_url: str | None = None) -> App:
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"the app path {path!r} must look like package.module:app")
    # Like uvicorn and celery: the current directory is importable.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r}: {exc}") from None
    app = getattr(module, attr, None)
    if not isinstance(app, App):
        raise ConfigError(f"{path!r} is not a redrive App")
    if database_url:
        app.settings = app.settings.with_(database_url=database_url)
    return app


def _store_url(args: argparse.Namespace) -> str:
    return args.database_url or Settings.load().database_url


# -- commands ----------------------------------------------------------------------


def _worker(args: argparse.Namespace) -> int:
    from redrive.runtime.worker import Worker

    app = load_app(args.app, args.database_url)
    worker = Worker(
        app, queues=args.queues or ("default",), concurrency=args.concurrency,
        lease_ttl=args.lease_ttl, shutdown_grace=args.shutdown_grace,
        poll_interval=args.poll_interval,
    )
    _ = app.store  # open now: a bad URL or an old schema is reported before any work
    try:
        worker.run_until_stopped()
    finally:
        app.close()
    return 0


def _migrate(args: argparse.Namespace) -> int:
    store = open_store(_store_url(args), check_schema=False)
    try:
        applied = store.migrate()
    finally:
        store.close()
    print("schema is up to date" if not applied else f"applied migrations {applied}")
    return 0


def _enqueue(args: argparse.Namespace) -> int:
    app = load_app(args.app, args.database_url)
    if not isinstance(args.args, list):
        raise ConfigError("--args must be a JSON array")
    if not isinstance(args.kwargs, dict):
        raise ConfigError("--kwargs must be a JSON object")
    try:
        result = app.enqueue(
            args.task, args=args.args, kwargs=args.kwargs, queue=args.queue,
            priority=args.priority, delay=args.delay, run_at=args.run_at,
            owner=args.owner, max_attempts=args.max_attempts,
        )
    finally:
        app.close()
    print(result.job.id)
    return 0


def _open(args: argparse.Namespace) -> App:
    return App(settings=Settings.load(database_url=args.database_url))


def _jobs_list(args: argparse.Namespace) -> int:
    app = _open(args)
    try:
        jobs = app.jobs(status=args.status, queue=args.queue, task=args.task, limit=args.limit)
    finally:
        app.close()
    if args.json:
        for job in jobs:
            print(json.dumps(job.to_dict()))
        return 0
    print(f"{'id':36}  {'task':20}  {'queue':10}  {'status':9}  {'tries':>5}  error")
    for job in jobs:
        print(f"{str(job.id):36}  {job.task[:20]:20}  {job.queue[:10]:10}  {job.status.value:9}  "
              f"{job.attempts:>2}/{job.max_attempts:<2}  {job.error_code or job.last_error_code or ''}")
    return 0


def _jobs_show(args: argparse.Namespace) -> int:
    app = _open(args)
    try:
        job = app.job(args.job_id)
        events = app.events(job.id)
    finally:
        app.close()
    if args.json:
        print(json.dumps({**job.to_dict(), "events": [e.to_dict() for e in events]}))
        return 0
    for name, value in job.to_dict().items():
        if value is not None:
            print(f"{name:18} {json.dumps(value) if isinstance(value, (dict, list)) else value}")
    print("events:")
    for e in events:
        meta = f" {json.dumps(e.meta)}" if e.meta else ""
        print(f"  {e.at.isoformat()}  {e.from_status or '-':9} -> {e.to_status:9} attempt {e.attempt}{meta}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from redrive.demo import run_demo

    return run_demo(database_url=args.database_url, jobs=args.jobs, concurrency=args.concurrency)

