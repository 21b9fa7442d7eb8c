"""Workers whose own clocks are five minutes ahead and five minutes behind
share a PostgreSQL database with an honest one. Every time that decides
something comes from the database's clock: none takes the live lease of a
job another runs, none runs a delayed job early, and a snooze's delay, set
by the skewed worker that ran the job, is kept on the database's clock, not
five minutes shorter or longer; the two skewed workers together start no
more jobs of a rate-limited queue in a window than its rate allows."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from redrive import Client, Settings, Status
from redrive.core.states import Status as S
from redrive.testing import assert_history, wait_for
from tests.apps.drain import app as drain_app
from tests.figures import record
from tests.integration.processes import WorkerProcess, executions

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

SKEWS = {"ahead": "+300s", "behind": "-300s"}
SNOOZE_S = 3.0
RATE, PER = 4, timedelta(seconds=2)  # tests/apps/drain.py's "metered" queue


def _snoozed_for(client: Client, job_id) -> float:
    """Seconds between the snooze's write and the next start, on the database's clock."""
    events = assert_history(client.store, job_id)
    snoozed = next(e for e in events if e.from_status is S.RUNNING and e.to_status is S.QUEUED)
    again = next(e for e in events if e.from_status is S.QUEUED and e.to_status is S.RUNNING and e.at > snoozed.at)
    return (again.at - snoozed.at).total_seconds()


def test_workers_five_minutes_off_keep_leases_due_times_and_delays_on_the_databases_clock(
    faketime, pg_url: str, tmp_path, workers,
) -> None:
    client = Client(drain_app.registry, settings=Settings.load(database_url=pg_url))
    try:
        workers.append(WorkerProcess(pg_url, tmp_path, "--lease-ttl", "3s", "--poll-interval", "0.1"))
        long = client.enqueue("sleep_then_record", args=["long", 8.0]).job
        wait_for(lambda: client.job(long.id).status is Status.RUNNING, timeout=30)
        delayed = client.enqueue("record", args=["delayed"], delay=timedelta(seconds=40)).job
        for name, skew in SKEWS.items():  # each also serves a queue of its own, and the rate-limited one
            workers.append(WorkerProcess(pg_url, tmp_path, "--lease-ttl", "3s", "--poll-interval", "0.1",
                                         "--queue", "default", "--queue", name, "--queue", "metered",
                                         prefix=("faketime", "-f", skew)))
        snoozes = {name: client.enqueue("snooze_once", args=[name, SNOOZE_S], queue=name).job for name in SKEWS}
        metered = [client.enqueue("record", args=[f"metered-{n}"], queue="metered").job for n in range(3 * RATE)]
        for job in [*snoozes.values(), *metered]:
            wait_for(lambda job=job: client.job(job.id).status is Status.SUCCEEDED, timeout=60)
        wait_for(lambda: client.job(long.id).status is Status.SUCCEEDED, timeout=30)

        # the skewed workers did run on their own clocks (their logs' first lines, against the honest one's)
        started = [datetime.strptime(w.log[:23], "%Y-%m-%d %H:%M:%S,%f") for w in workers]
        for (name, skew), at in zip(SKEWS.items(), started[1:], strict=True):
            assert abs((at - started[0]).total_seconds() - int(skew[:-1])) < 60, (name, at, started[0])
        ran = executions(tmp_path)
        scenario = "PostgreSQL, workers' clocks +5 and -5 min"
        record(scenario, "runs of a job holding a live lease", ran["long"], "1")
        record(scenario, "delayed jobs run early", ran["delayed"], "0")
        assert ran["long"] == 1, f"the long job ran {ran['long']} times: its live lease was taken"
        assert client.job(long.id).attempts == 1
        assert client.job(delayed.id).status is Status.SCHEDULED and ran["delayed"] == 0, "the delayed job ran early"
        for name, job in snoozes.items():
            waited = _snoozed_for(client, job.id)
            record(scenario, f"a {SNOOZE_S:g} s snooze on the worker {name}, waited (s)", f"{waited:.2f}",
                   f">= {SNOOZE_S:g}, < {SNOOZE_S + 10:g}")
            assert SNOOZE_S <= waited < SNOOZE_S + 10, (name, waited)
            assert ran[name] == 1
        # the rate, kept by the two skewed workers together: no window of its length holds more starts
        starts = sorted(client.job(job.id).started_at for job in metered)
        busiest = max(sum(1 for t in starts if first <= t < first + PER) for first in starts)
        record(scenario, f"most starts in any {PER.total_seconds():g} s, a rate of {RATE}", busiest, f"<= {RATE}")
        assert busiest <= RATE, starts
        assert starts[-1] - starts[0] >= 2 * PER * 0.9, starts  # the rate did hold them back (three windows' worth)
    finally:
        client.close()
