"""``python -m criticizer services|worker|submit``: each part as its own
process, configured from the environment (settings.py). Operators use
redrive's own tools on the same database: ``redrive dead ...`` and the
dashboard of ``redrive serve`` (README.md, "Operating it")."""

from __future__ import annotations

import argparse
import sys

from criticizer.settings import Settings
from redrive import ConfigError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m criticizer")
    parts = parser.add_subparsers(dest="part", required=True)
    services = parts.add_parser("services", help="the source, LLM and webhook (stand-ins for the real ones)")
    services.add_argument("--port", type=int, default=8095)
    parts.add_parser("worker", help="a worker running the pipeline")
    submit = parts.add_parser("submit", help="queue a change for criticism")
    submit.add_argument("change_id")
    submit.add_argument("--channel", default="reviews")
    submit.add_argument("--requested-by", default="")
    args, rest = parser.parse_known_args(argv)
    if args.part == "services":
        from criticizer.services import main as serve

        serve(["--port", str(args.port), *rest])
        return 0
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"criticizer: {exc}", file=sys.stderr)
        return 2
    from criticizer.pipeline import make_app

    with make_app(settings) as app:
        if args.part == "worker":
            from redrive import Worker
            from redrive.logs import configure, log_events

            configure(level="info", fmt="json")
            log_events(app)
            Worker(app.client, concurrency=settings.worker_concurrency).run_until_stopped()
        else:
            job = app.enqueue("criticize", args=[args.change_id, args.channel],
                              kwargs={"requested_by": args.requested_by})
            print(f"change {args.change_id} queued: job {job.job.id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
