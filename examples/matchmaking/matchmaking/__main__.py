"""``python -m matchmaking users|scheduler|worker|rerun|offers``: each part
as its own process, configured from the environment (settings.py)."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from datetime import datetime, time, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from matchmaking.settings import Settings
from redrive import ConfigError

if TYPE_CHECKING:
    from redrive import App


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matchmaking")
    parts = parser.add_subparsers(dest="part", required=True)
    users = parts.add_parser("users", help="sign up demo users spread over many time zones")
    users.add_argument("--count", type=int, default=200)
    parts.add_parser("scheduler", help="enqueue each time zone's 09:00 firing (run one or more)")
    worker = parts.add_parser("worker", help="a worker generating offers")
    worker.add_argument("--alerts", action="store_true", help="evaluate the monitoring rules here (one process)")
    rerun = parts.add_parser("rerun", help="run a past day again in one time zone (safe: the same offers)")
    rerun.add_argument("date", help="the local date, YYYY-MM-DD")
    rerun.add_argument("timezone")
    shown = parts.add_parser("offers", help="a user's offers, as JSON lines")
    shown.add_argument("user_id")
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"matchmaking: {exc}", file=sys.stderr)
        return 2
    from matchmaking.db import Db
    from matchmaking.tasks import SCHEDULE, create_tables, day_of, make_app

    create_tables(settings)
    with make_app(settings) as app, Db(settings.database_url) as db:
        if args.part == "users":
            from matchmaking.users import spread

            print(f"{len(spread(db, args.count))} users signed up")
        elif args.part == "scheduler":
            import asyncio

            from redrive import Scheduler

            asyncio.run(Scheduler(app.client).run())
        elif args.part == "worker":
            return _work(app, settings, alerts=args.alerts)
        elif args.part == "rerun":
            schedule = app.schedules[SCHEDULE]
            start = datetime.combine(datetime.fromisoformat(args.date).date(), time(0), ZoneInfo(args.timezone))
            firings = schedule.firings(args.timezone, start - timedelta(seconds=1), start + timedelta(days=1))
            if not firings:
                print(f"matchmaking: no firing on {args.date} in {args.timezone}", file=sys.stderr)
                return 2
            people = [r["id"] for r in db.rows("SELECT id FROM users WHERE timezone = %s ORDER BY id", args.timezone)]
            run = uuid.uuid4().hex[:12]  # each re-run its own workflow (each job is idempotent anyway)
            made = app.create_workflow(day_of(app, people, args.date, args.timezone, firings[0].at.isoformat(),
                                              key=f"rerun:{run}:{SCHEDULE}:{args.date}:{args.timezone}"))
            print(f"{len(people)} jobs queued for {args.date} in {args.timezone} (workflow {made.id})")
        else:
            for row in db.rows("SELECT * FROM offers WHERE user_id = %s ORDER BY date, score DESC", args.user_id):
                print(json.dumps(row, default=str))
    return 0


def _work(app: App, settings: Settings, *, alerts: bool) -> int:
    from matchmaking.tasks import ON_CALL
    from redrive import Plugin, Worker
    from redrive.alerts import AlertEvaluator
    from redrive.logs import configure, log_events

    configure(level=settings.log_level, fmt="json")
    log_events(app)
    notifications = ON_CALL.get(app)  # on-call hears of dead letters, alerts and runs over the threshold
    plugins: list[Plugin] = [notifications] if notifications else []
    if alerts:
        plugins.append(AlertEvaluator(app, notifications=notifications))
    Worker(app.client, concurrency=settings.worker_concurrency, plugins=plugins).run_until_stopped()
    return 0


if __name__ == "__main__":
    sys.exit(main())
