"""The matchmaking app: a schedule at 09:00 local in every time zone that
has users, one run per zone and local day (the firing's job, keyed
``matchmaking:{date}:{tz}``), and the job of the design (§Idempotent Job
Execution) for each user.

A zone's run is a workflow the firing's job spawns with its success: one
step per user, then one summary step that runs once, after every user's job
has ended (however it ended), records the run (offers made, failures,
duration) in ``matchmaking_runs`` and tells on-call when more than 1 % of the
users failed (the design's monitoring threshold). The workflow is created in
the transaction that ends the firing's job, so a retried or re-run firing
never makes the day's jobs twice.

The job takes its row in ``matchmaking_jobs`` with the design's upsert: a
row already ``completed`` is not touched, and its offers are returned as
they are (a re-run, a second scheduler, a retry after a crash). Otherwise
the offers are computed (deterministically, ``offers.py``) and written with
the row's completion in one transaction fenced on the job's lease, so two
workers can never both write a batch.

Transient database errors and timeouts are retried after 30 s, 2 min and
5 min; logic errors and data inconsistencies are not, and go to the dead
letters, where on-call is told (``Notifications``). The design's four
monitoring thresholds are alert rules.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import weakref
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from matchmaking import offers
from matchmaking.db import Db, connection
from matchmaking.settings import Settings
from redrive import (
    DEFAULT_TAXONOMY,
    After,
    App,
    Classifier,
    ErrorCode,
    Firing,
    Fixed,
    LeaseLost,
    Permanent,
    Status,
    Taxonomy,
    Transient,
    Workflow,
    current_job,
    parents,
    spawn,
    write_phase,
)
from redrive.alerts import Check, DurationPercentile, FailureRate, QueueDepth
from redrive.notify import Notifications

TASK, SCHEDULE = "generate_offers", "matchmaking"
RUN, SUMMARY = "run_zone", "summarize_run"  # a zone's day: the firing's job, and its run's last step
RUN_FAILURE_RATE = 0.01  # the design's monitoring threshold: on-call hears of a run over it
ON_CALL: weakref.WeakKeyDictionary[App, Notifications] = weakref.WeakKeyDictionary()
TAXONOMY = Taxonomy([
    *DEFAULT_TAXONOMY,
    ErrorCode("DB_TRANSIENT", True, "The database was briefly unavailable; the job will be retried."),
    ErrorCode("LOGIC_ERROR", False, "Offer generation hit a logic error; it needs a manual fix."),
    ErrorCode("DATA_INCONSISTENCY", False, "The user's data is inconsistent; it needs a manual fix."),
])


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _database_errors() -> tuple[type[Exception], ...]:
    try:
        import psycopg
    except ImportError:
        return (sqlite3.OperationalError,)
    return (sqlite3.OperationalError, psycopg.OperationalError)


log = logging.getLogger("matchmaking")


def make_app(settings: Settings) -> App:
    app = App(settings.database_url, classifier=Classifier(taxonomy=TAXONOMY))
    transient_db = _database_errors()
    on_call = Notifications.from_env(app)  # dead letters, alerts and runs over the threshold
    if on_call is not None:
        ON_CALL[app] = on_call
    attempts, backoff = len(settings.retry_delays_s) + 1, Fixed([timedelta(seconds=s) for s in settings.retry_delays_s])

    @app.task(name=TASK, timeout=timedelta(minutes=5), max_attempts=attempts, backoff=backoff)
    def generate_offers(date: str, timezone: str, user_id: str, at: str) -> dict[str, Any]:
        with connection(settings.database_url, settings.db_lock_timeout_ms) as db:
            try:
                return _generate(db, settings, date, timezone, user_id, datetime.fromisoformat(at))
            except (LeaseLost, Transient, Permanent):
                raise
            except transient_db as exc:
                raise Transient(f"database error: {type(exc).__name__}", code="DB_TRANSIENT") from exc

    def read(sql: str, *params: Any) -> list[dict[str, Any]]:
        with connection(settings.database_url) as db:
            return db.rows(sql, *params)

    def zones() -> list[str]:
        return [r["timezone"] for r in read("SELECT DISTINCT timezone FROM users ORDER BY timezone")]

    def users_in(zone: str) -> list[str]:
        return [r["id"] for r in read("SELECT id FROM users WHERE timezone = %s ORDER BY id", zone)]

    @app.task(name=RUN, max_attempts=attempts, backoff=backoff)
    def run_zone(date: str, timezone: str, at: str) -> dict[str, Any]:
        """The firing's job: the day's workflow, made with this job's success."""
        day = day_of(app, users_in(timezone), date, timezone, at, key=f"{SCHEDULE}:{date}:{timezone}")
        return {"workflow": str(spawn(day))}

    @app.task(name=SUMMARY, max_attempts=attempts, backoff=backoff)
    def summarize_run(date: str, timezone: str, at: str) -> dict[str, Any]:
        users = [p for p in parents() if p.name == "users"]
        failed = [p for p in users if p.status is not Status.SUCCEEDED]
        made = sum(len(p.result.get("offers", ())) for p in users
                   if p.status is Status.SUCCEEDED and isinstance(p.result, dict))
        rate = len(failed) / len(users) if users else 0.0
        fired, now = datetime.fromisoformat(at), datetime.now(UTC)
        run = str(current_job().id)
        alert = rate > RUN_FAILURE_RATE
        with connection(settings.database_url) as db:
            db.run("INSERT INTO matchmaking_runs (run, date, timezone, users, offers, failures, failure_rate, "
                   "fired_at, summarized_at, duration_s, alerted) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                   "ON CONFLICT (run) DO NOTHING", run, date, timezone, len(users), made, len(failed), rate,
                   fired.isoformat(), now.isoformat(), (now - fired).total_seconds(), int(alert))
        if alert:
            _tell_on_call(app, date, timezone, len(users), failed, run)
        return {"users": len(users), "offers": made, "failures": len(failed), "alerted": alert}

    def firing_kwargs(firing: Firing) -> dict[str, Any]:
        return {"date": firing.local_date.isoformat(), "timezone": firing.timezone, "at": firing.at.isoformat()}

    app.schedule(SCHEDULE, RUN, settings.send_at, timezones=zones, kwargs=firing_kwargs)

    # The design's monitoring table.
    def duplicate_offers() -> tuple[bool, str]:
        with Db(settings.database_url) as db:
            found = db.one("SELECT count(*) AS n FROM (SELECT date, user_id FROM offers GROUP BY date, user_id "
                           "HAVING count(*) > %s) AS over", settings.offers_per_day)
        n = int(found["n"]) if found else 0
        return n > 0, f"{n} user-days hold more than one batch of offers"

    app.alert(FailureRate("matchmaking_failure_rate", above=0.01, task=TASK, window=timedelta(minutes=15)))
    app.alert(DurationPercentile("matchmaking_duration_p95", above=timedelta(minutes=5), percentile=0.95, task=TASK))
    app.alert(QueueDepth("matchmaking_queue_depth", above=1000))
    app.alert(Check("matchmaking_duplicate_offers", duplicate_offers))
    return app


def day_of(app: App, users: list[str], date: str, timezone: str, at: str, *, key: str) -> Workflow:
    """A zone's day as a workflow: a step per user, then the summary, once every one has ended."""
    day = Workflow(f"matchmaking {date} {timezone}", key=key)
    people = day.map((app.registry.task(TASK).call(date, timezone, user, at) for user in users), name="users")
    day.add(app.registry.task(SUMMARY).call(date, timezone, at), name="summary", after=After(people, "ended"))
    return day


def _tell_on_call(app: App, date: str, timezone: str, users: int, failed: list[Any], run: str) -> None:
    codes = Counter(p.error_code or str(p.status) for p in failed)
    lines = [f"{len(failed)} of {users} users got no offers ({len(failed) / users:.1%}, over "
             f"{RUN_FAILURE_RATE:.0%})", *(f"{code}: {n}" for code, n in codes.most_common(5)),
             "Failed jobs are in the dead letters: fix the cause, then replay them."]
    subject = f"Matchmaking run {date} {timezone}: {len(failed)} users failed"
    on_call = ON_CALL.get(app)
    if on_call is None:  # no channel configured: the log is all there is
        log.warning("%s (%s)", subject, "; ".join(lines))
        return
    on_call.tell(subject, lines, key=f"matchmaking-run:{run}")


_CLAIM = ("INSERT INTO matchmaking_jobs (date, timezone, user_id, status, started_at) "
          "VALUES (%s, %s, %s, 'running', %s) "
          "ON CONFLICT (date, user_id) DO UPDATE SET status = 'running', started_at = excluded.started_at, "
          "retry_count = matchmaking_jobs.retry_count + 1 WHERE matchmaking_jobs.status <> 'completed' "
          "RETURNING retry_count")


def _generate(db: Db, settings: Settings, day: str, timezone: str, user_id: str, at: datetime) -> dict[str, Any]:
    if db.one(_CLAIM, day, timezone, user_id, _now()) is None:  # completed before: the same offers
        done = db.one("SELECT offers FROM matchmaking_jobs WHERE date = %s AND user_id = %s", day, user_id)
        assert done is not None
        return {"offers": [o["id"] for o in json.loads(done["offers"])], "reused": True}
    try:
        user = db.one("SELECT id, timezone, interests FROM users WHERE id = %s", user_id)
        if user is None:
            raise Permanent(f"user {user_id} does not exist", code="LOGIC_ERROR")
        if user["timezone"] != timezone:
            raise Permanent(f"user {user_id} is in {user['timezone']}, not {timezone}", code="DATA_INCONSISTENCY")
        made = offers.compute(db, day, timezone, user, settings.offers_per_day, at)
        with write_phase(db.conn):
            db.many("INSERT INTO offers (id, date, user_id, candidate_id, score, algorithm, offered_at, expires_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                    [(o["id"], day, user_id, o["candidate_id"], o["score"], o["algorithm"], o["offered_at"],
                      o["expires_at"]) for o in made])
            db.run("UPDATE matchmaking_jobs SET status = 'completed', offers = %s, algorithm = %s, completed_at = %s, "
                   "error_message = NULL WHERE date = %s AND user_id = %s",
                   json.dumps(made), offers.ALGORITHM, _now(), day, user_id)
    except LeaseLost:
        raise  # another worker has the job now
    except Exception as exc:
        db.run("UPDATE matchmaking_jobs SET status = 'failed', error_message = %s WHERE date = %s AND user_id = %s "
               "AND status <> 'completed'", str(exc)[:500], day, user_id)
        raise
    return {"offers": [o["id"] for o in made], "reused": False}


def create_tables(settings: Settings) -> None:
    with Db(settings.database_url) as db:
        db.create_tables()
