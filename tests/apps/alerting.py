"""Jobs that fail for good (their messages carry planted secrets), jobs
that succeed, a queue with an alert on its depth and an alert on the
failures of one task, for notification tests; notifications come from the environment, as `redrive worker` sets
them up."""

from __future__ import annotations

import time
from datetime import timedelta

from redrive import App, Permanent
from redrive.alerts import FailureRate, QueueDepth

app = App()  # REDRIVE_DATABASE_URL comes from the environment
app.alert(QueueDepth("bulk_backlog", above=20, queue="bulk"))
app.alert(FailureRate("doomed_failing", above=0.5, window=timedelta(minutes=1), task="doomed", min_jobs=5))


@app.task
def doomed(doc: str, secret: str) -> None:
    raise Permanent(f"cannot convert {doc}: {secret}", code="BAD_INPUT")


@app.task
def fine(n: int) -> int:
    return n


@app.task(queue="bulk")
def bulk(n: int) -> int:
    return n


@app.task(max_attempts=1)
def stuck(doc: str) -> None:
    """Runs until its worker is killed: the reclaim decides how it ends."""
    time.sleep(600)
