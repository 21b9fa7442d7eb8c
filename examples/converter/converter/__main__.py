"""``python -m converter gateway|worker|web|retention``: each part of the
converter as its own process, configured from the environment (settings.py)."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import timedelta

from converter.settings import Settings
from redrive import RedriveError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m converter")
    parts = parser.add_subparsers(dest="part", required=True)
    gateway = parts.add_parser("gateway", help="the conversion gateway (a stand-in for the real one)")
    gateway.add_argument("--port", type=int, default=8081)
    parts.add_parser("worker", help="a worker converting uploads")
    web = parts.add_parser("web", help="the upload service and the queue page")
    web.add_argument("--port", type=int, default=8080)
    retention = parts.add_parser("retention", help="remove sources and results past RETENTION_HOURS")
    retention.add_argument("--every", type=float, default=0, help="seconds between passes (0: one pass)")
    parts.add_parser("demo", help="all of it on SQLite, driven through a minute of uploads and an outage")
    args = parser.parse_args(argv)
    if args.part == "demo":
        from converter.demo import run

        return run()
    if args.part == "gateway":
        from converter.gateway import main as serve

        serve(["--port", str(args.port)])
        return 0
    try:
        settings = Settings.from_env()
        return _run(args, settings)
    except RedriveError as exc:  # a bad knob, an unmigrated database: one line, no traceback
        print(f"converter: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, settings: Settings) -> int:
    if args.part == "worker":
        from converter.tasks import make_app
        from redrive import Worker
        from redrive.logs import configure, log_events

        configure(level="info", fmt=settings.log_format)
        app = make_app(settings)
        _ = app.store  # opened now: an unmigrated database is one line (redrive migrate), before any work
        log_events(app)
        if settings.metrics_port >= 0:
            from converter.tasks import serve_metrics

            serve_metrics(app, settings.metrics_port)
        Worker(app.client, concurrency=settings.worker_concurrency,
               lease_ttl=timedelta(seconds=settings.worker_lease_ttl_sec)).run_until_stopped()
    elif args.part == "web":
        import uvicorn

        from converter.web import create_app

        # uvicorn says which port it listens on (--port 0: one the system picks);
        # requests are not logged.
        web = create_app(settings)
        _ = web.state.redrive.store  # opened now, as the worker's
        uvicorn.run(web, host="127.0.0.1", port=args.port, log_level="info", access_log=False)
    else:
        from converter.storage import remove_expired

        while True:
            print(f"retention: removed {remove_expired(settings)} files", flush=True)
            if not args.every:
                break
            time.sleep(args.every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
