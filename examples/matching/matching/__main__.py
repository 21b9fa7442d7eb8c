"""``python -m matching provider|worker|submit|show``: each part as its own
process, configured from the environment (settings.py)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta
from typing import TYPE_CHECKING

from matching.settings import Settings
from redrive import ConfigError

if TYPE_CHECKING:
    from redrive import App
    from redrive.notify import Notifications


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matching")
    parts = parser.add_subparsers(dest="part", required=True)
    provider = parts.add_parser("provider", help="the LLM provider (a stand-in for the real one)")
    provider.add_argument("--port", type=int, default=8090)
    provider.add_argument("--api-key", default="")
    worker = parts.add_parser("worker", help="a matching worker")
    worker.add_argument("--alerts", action="store_true", help="evaluate the stuck-document alarm here (one process)")
    submit = parts.add_parser("submit", help="ingest a document and queue it for matching")
    submit.add_argument("id")
    submit.add_argument("--tenant", required=True)
    submit.add_argument("--counterparty", required=True)
    submit.add_argument("--body", required=True)
    parts.add_parser("show", help="every document's matching state, as JSON lines")
    args = parser.parse_args(argv)
    if args.part == "provider":
        from matching.provider import main as serve

        serve(["--port", str(args.port), "--api-key", args.api_key])
        return 0
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"matching: {exc}", file=sys.stderr)
        return 2
    from matching.db import connect
    from matching.tasks import create_tables, make_app

    create_tables(settings)
    app, notifications = make_app(settings)
    with app:
        if args.part == "worker":
            return _work(app, notifications, settings, alerts=args.alerts)
        with connect(settings.database_url) as db:
            if args.part == "submit":
                from matching.documents import submit as ingest

                ingest(db, app, id=args.id, tenant=args.tenant, counterparty=args.counterparty, body=args.body)
                print(f"document {args.id} queued for matching")
            else:
                for row in db.rows("SELECT id, tenant, matching_status, matching_attempts, matching_error, "
                                   "cluster_id FROM document ORDER BY id"):
                    print(json.dumps(row, default=str))
    return 0


def _work(app: App, notifications: Notifications | None, settings: Settings, *, alerts: bool) -> int:
    from redrive import Plugin, Worker
    from redrive.alerts import AlertEvaluator
    from redrive.logs import configure, log_events

    configure(level="info", fmt="json")
    log_events(app)
    plugins: list[Plugin] = [notifications] if notifications else []
    if alerts:
        plugins.append(AlertEvaluator(app, notifications=notifications))
    Worker(app.client, concurrency=settings.worker_concurrency,
           lease_ttl=timedelta(seconds=settings.worker_lease_ttl_sec), plugins=plugins).run_until_stopped()
    return 0


if __name__ == "__main__":
    sys.exit(main())
