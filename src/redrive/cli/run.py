"""The commands that run: ``redrive worker`` (alone, or a supervisor of
worker processes with ``--processes``), ``redrive serve`` and ``redrive
scheduler``, with what their flags and environment run beside them
(notifications, metrics, alerts, Sentry)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from datetime import timedelta
from typing import Any

from redrive import logs
from redrive.app import App
from redrive.cli.load import load_app, store_url
from redrive.cli.parsing import Commands, queue_arg, seconds, size
from redrive.errors import ConfigError


def add_commands(cli: Commands) -> None:
    worker = cli.command("worker", _worker, "Run a worker until SIGTERM or SIGINT.")
    cli.with_app(worker)
    worker.add_argument("-q", "--queue", action="append", dest="queues", type=queue_arg,
                        help="a queue to work, with its own limit of jobs at once if given: email or "
                             "email=5 (repeatable; default: default)")
    worker.add_argument("-c", "--concurrency", type=int, help="jobs at once (REDRIVE_WORKER_CONCURRENCY)")
    worker.add_argument("--lease-ttl", type=seconds, help="such as 30s (REDRIVE_WORKER_LEASE_TTL)")
    worker.add_argument("--shutdown-grace", type=seconds, help="such as 30s (REDRIVE_WORKER_SHUTDOWN_GRACE)")
    worker.add_argument("--poll-interval", type=seconds, help="such as 1s (REDRIVE_WORKER_POLL_INTERVAL)")
    worker.add_argument("--schedules", action="store_true", help="also run the app's schedules")
    worker.add_argument("--retention", type=seconds,
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
    worker.add_argument("--max-memory-per-child", type=size, metavar="SIZE",
                        help="with --processes: replace a worker process once its resident memory passes "
                             "this, such as 500MB or 2GB")
    worker.add_argument("--worker-id", help=argparse.SUPPRESS)  # a supervisor names its children
    worker.add_argument("--max-jobs", type=int, help=argparse.SUPPRESS)  # and recycles them
    worker.add_argument("--max-memory", type=int, help=argparse.SUPPRESS)  # (bytes)
    worker.add_argument("--metrics-to-supervisor", action="store_true", help=argparse.SUPPRESS)  # its --metrics-port

    scheduler = cli.command("scheduler", _scheduler, "Enqueue the app's schedules until SIGTERM or SIGINT.")
    cli.with_app(scheduler)
    scheduler.add_argument("--interval", type=seconds, default=timedelta(seconds=1),
                           help="seconds between ticks (default 1)")

    serve = cli.command("serve", _serve, "Serve the HTTP API under /api/v1 (needs redrive[web]); with no APP, "
                        "the operator views of any redrive database. Tokens: REDRIVE_API_TOKENS.")
    cli.with_app(serve)
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="default 8000")
    serve.add_argument("--alerts", action="store_true",
                       help="evaluate the app's alert rules here (in one process only; docs/alerts.md)")


def _worker(args: argparse.Namespace) -> int:
    from redrive.runtime.worker import Worker

    processes = args.settings.worker_processes if args.processes is None else args.processes
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
# built as well: a quarter of a no-op job's CPU (bench/NOTES.md).
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
    notifications = _notifications(app, args.settings)
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
    notifications = _notifications(app, args.settings)
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
    dsn = args.settings.sentry_dsn
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


def _notifications(app: App, settings: Any) -> Any:
    """Slack and email notifications, when the environment configures a channel."""
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

    app = load_app(args.app, args.database_url) if args.app else App(store_url(args))
    with app:
        _ = app.store  # open now: a bad URL or an old schema is reported before serving
        logs.log_events(app)
        notifications = _notifications(app, args.settings)
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
