"""``python -m review_notify provider|service|worker``: each part as its
own process, configured from the environment (settings.py)."""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta

from redrive import ConfigError
from review_notify.settings import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m review_notify")
    parts = parser.add_subparsers(dest="part", required=True)
    provider = parts.add_parser("provider", help="the email provider (a stand-in for the real one)")
    provider.add_argument("--port", type=int, default=8097)
    provider.add_argument("--api-key", default="")
    service = parts.add_parser("service", help="the API callers request review notifications from")
    service.add_argument("--port", type=int, default=8096)
    parts.add_parser("worker", help="a worker sending the notifications")
    args = parser.parse_args(argv)
    if args.part == "provider":
        from review_notify.provider import main as serve

        serve(["--port", str(args.port), "--api-key", args.api_key])
        return 0
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"review_notify: {exc}", file=sys.stderr)
        return 2
    from review_notify.tasks import make_app

    with make_app(settings) as app:
        if args.part == "service":
            import uvicorn

            from review_notify.service import create_app

            # uvicorn says which port it listens on (--port 0: one the system picks);
            # requests are not logged.
            uvicorn.run(create_app(app), host="127.0.0.1", port=args.port, log_level="info", access_log=False)
            return 0
        from redrive import Worker
        from redrive.logs import configure, log_events
        from redrive.notify import Notifications

        configure(level="info", fmt="json")
        log_events(app)
        # Operators are told (REDRIVE_SLACK_WEBHOOK_URL, REDRIVE_SMTP_HOST, ...) of reviews that
        # failed for good and of rows found marked sent without the provider's id (§8.2, second row).
        notifications = Notifications.from_env(app)
        Worker(app.client, concurrency=settings.worker_concurrency,
               lease_ttl=timedelta(seconds=settings.worker_lease_ttl_sec),
               plugins=[notifications] if notifications else []).run_until_stopped()
    return 0


if __name__ == "__main__":
    sys.exit(main())
