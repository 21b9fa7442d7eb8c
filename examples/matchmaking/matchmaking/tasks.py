"""The matchmaking app: a schedule at 09:00 local in every time zone that
has users, one job per user under the key ``matchmaking:{date}:{tz}:{user}``,
and the job of the design (§Idempotent Job Execution).

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
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

from matchmaking import offers
from matchmaking.db import Db, connection
from matchmaking.settings import Settings
from redrive import (
    DEFAULT_TAXONOMY,
    App,
    Classifier,
    ErrorCode,
    Firing,
    Fixed,
    LeaseLost,
    Permanent,
    Taxonomy,
    Transient,
    write_phase,
)
from redrive.alerts import Check, DurationPercentile, FailureRate, QueueDepth

TASK, SCHEDULE = "generate_offers", "matchmaking"
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


def make_app(settings: Settings) -> App:
    app = App(settings.database_url, classifier=Classifier(taxonomy=TAXONOMY))
    transient_db = _database_errors()

    @app.task(name=TASK, max_attempts=len(settings.retry_delays_s) + 1,
              backoff=Fixed([timedelta(seconds=s) for s in settings.retry_delays_s]),
              timeout=timedelta(minutes=5))
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

    def job_kwargs(firing: Firing) -> dict[str, Any]:
        return {"date": firing.local_date.isoformat(), "timezone": firing.timezone, "user_id": firing.entity,
                "at": firing.at.isoformat()}

    app.schedule(SCHEDULE, TASK, settings.send_at, timezones=zones, entities=users_in, kwargs=job_kwargs)

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
