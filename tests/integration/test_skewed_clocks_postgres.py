"""Workers whose own clocks are five minutes ahead and five minutes behind
share a PostgreSQL database with an honest one. Every time that decides
something comes from the database's clock: none takes the live lease of a
job another runs, none runs a delayed job early, and a snooze's or a retry's delay, set
by the skewed worker that ran the job, is kept on the database's clock, not
five minutes shorter or longer; the two skewed workers together start no
more jobs of a rate-limited queue in a window than its rate allows. A daily
09:00 firing, run by the two skewed workers' schedulers, comes at 09:00 on
the database's clock, once."""

from __future__ import annotations

import shutil
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from redrive import Client, Settings, Status
from redrive.core.states import Status as S
from redrive.testing import assert_history, wait_for
from tests.apps.drain import app as drain_app
from tests.apps.morning import app as morning_app
from tests.conftest import IN_CI
from tests.figures import record
from tests.integration.processes import WorkerProcess, executions
from tests.integration.skew import assert_lease_kept_and_nothing_early, lease_and_delay

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

SKEWS = {"ahead": "+300s", "behind": "-300s"}
SNOOZE_S = 3.0
RETRY_S = 3.0  # tests/apps/drain.py's retry_once backoff
RATE, PER = 4, timedelta(seconds=2)  # tests/apps/drain.py's "metered" queue


def _snoozed_for(client: Client, job_id) -> float:
    """Seconds between the snooze's (or retry's) write and the next start, on the database's clock."""
    events = assert_history(client.store, job_id)
    snoozed = next(e for e in events if e.from_status is S.RUNNING and e.to_status is S.QUEUED)
    again = next(e for e in events if e.from_status is S.QUEUED and e.to_status is S.RUNNING and e.at > snoozed.at)
    return (again.at - snoozed.at).total_seconds()


def test_workers_five_minutes_off_keep_leases_due_times_and_delays_on_the_databases_clock(
    faketime, pg_url: str, tmp_path, workers,
) -> None:
    client = Client(drain_app.registry, settings=Settings.load(database_url=pg_url))
    try:
        long, delayed = lease_and_delay(client, pg_url, tmp_path, workers)
        for name, skew in SKEWS.items():  # each also serves a queue of its own, and the rate-limited one
            workers.append(WorkerProcess(pg_url, tmp_path, "--lease-ttl", "3s", "--poll-interval", "0.1",
                                         "--queue", "default", "--queue", name, "--queue", "metered",
                                         prefix=faketime(skew)))
        snoozes = {name: client.enqueue("snooze_once", args=[name, SNOOZE_S], queue=name).job for name in SKEWS}
        retries = {name: client.enqueue("retry_once", args=[f"retry-{name}"], queue=name).job for name in SKEWS}
        metered = [client.enqueue("record", args=[f"metered-{n}"], queue="metered").job for n in range(3 * RATE)]
        for job in [*snoozes.values(), *retries.values(), *metered]:
            wait_for(lambda job=job: client.job(job.id).status is Status.SUCCEEDED, timeout=60)

        # the skewed workers did run on their own clocks (their logs' first lines, against the honest one's)
        started = [datetime.strptime(w.log[:23], "%Y-%m-%d %H:%M:%S,%f") for w in workers]
        for (name, skew), at in zip(SKEWS.items(), started[1:], strict=True):
            assert abs((at - started[0]).total_seconds() - int(skew[:-1])) < 60, (name, at, started[0])
        scenario = "PostgreSQL, workers' clocks +5 and -5 min"
        assert_lease_kept_and_nothing_early(client, tmp_path, scenario, long, delayed)
        ran = executions(tmp_path)
        for name, job in snoozes.items():
            waited = _snoozed_for(client, job.id)
            record(scenario, f"a {SNOOZE_S:g} s snooze on the worker {name}, waited (s)", f"{waited:.2f}",
                   f">= {SNOOZE_S:g}, < {SNOOZE_S + 10:g}")
            assert SNOOZE_S <= waited < SNOOZE_S + 10, (name, waited)
            assert ran[name] == 1
            waited = _snoozed_for(client, retries[name].id)  # the retry's delay: its backoff's 3 s
            record(scenario, f"a {RETRY_S:g} s retry on the worker {name}, waited (s)", f"{waited:.2f}",
                   f">= {RETRY_S:g}, < {RETRY_S + 10:g}")
            assert RETRY_S <= waited < RETRY_S + 10, (name, waited)
        # the rate, kept by the two skewed workers together: no window of its length holds more starts
        starts = sorted(client.job(job.id).started_at for job in metered)
        busiest = max(sum(1 for t in starts if first <= t < first + PER) for first in starts)
        record(scenario, f"most starts in any {PER.total_seconds():g} s, a rate of {RATE}", busiest, f"<= {RATE}")
        assert busiest <= RATE, starts
        assert starts[-1] - starts[0] >= 2 * PER * 0.9, starts  # the rate did hold them back (three windows' worth)
    finally:
        client.close()


LEAD_S = 25  # 09:00 comes this long after the test starts, on the database's clock
LATE_S = 10  # a firing may come this late (a scheduler ticks every second; the suite loads the machine)


def _zone_where_nine_is(at: datetime, directory: Path) -> Path:
    """A time zone of the test's own (zic) whose 09:00 is the instant ``at``:
    its UTC offset is whatever puts it there, to the second."""
    if shutil.which("zic") is None:
        message = "zic (Debian's libc-bin) is needed to make a time zone"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    offset = (timedelta(hours=9) - timedelta(hours=at.hour, minutes=at.minute, seconds=at.second)) % timedelta(days=1)
    if offset > timedelta(hours=12):
        offset -= timedelta(days=1)
    sign, seconds = ("-" if offset < timedelta(0) else ""), int(abs(offset.total_seconds()))
    source = directory / "nine.zi"
    source.write_text(f"Zone Test/Nine {sign}{seconds // 3600}:{seconds // 60 % 60:02}:{seconds % 60:02} - NINE\n")
    zones = directory / "zoneinfo"
    subprocess.run(["zic", "-d", str(zones), str(source)], check=True, capture_output=True, timeout=30)
    return zones


def test_a_nine_o_clock_firing_comes_at_nine_on_the_databases_clock_whatever_the_schedulers_clocks(
    faketime, pg_url: str, tmp_path, workers,
) -> None:
    client = Client(morning_app.registry, settings=Settings.load(database_url=pg_url))
    try:
        nine = (client.store.now() + timedelta(seconds=LEAD_S)).replace(microsecond=0)
        zones = _zone_where_nine_is(nine, tmp_path)
        for skew in SKEWS.values():  # one scheduler five minutes ahead, one five minutes behind
            workers.append(WorkerProcess(pg_url, tmp_path, "--schedules", "--poll-interval", "0.2",
                                         app="tests.apps.morning:app", prefix=faketime(skew),
                                         env={"PYTHONTZPATH": str(zones), "REDRIVE_TEST_ZONE": "Test/Nine"}))
        wait_for(lambda: all("scheduler started" in w.log for w in workers), timeout=LEAD_S)
        assert client.store.now() < nine - timedelta(seconds=1), "the schedulers started after 09:00"
        wait_for(lambda: client.jobs(task="morning"), timeout=LEAD_S + 30, every=0.1, what="the 09:00 firing")
        time.sleep(2)  # a second firing, were there one, would come within a tick
        fired = client.jobs(task="morning")
        late = (fired[0].created_at - nine).total_seconds()
        record("PostgreSQL, workers' clocks +5 and -5 min", "a 09:00 firing, after 09:00 on the database's clock (s)",
               f"{late:.2f}", f">= 0, < {LATE_S}")
        assert len(fired) == 1, fired
        assert 0 <= late < LATE_S, (fired[0].created_at, nine)
    finally:
        client.close()
