"""``redrive worker APP --processes N``: a supervisor and its worker
processes, for real. A child SIGKILLed while it holds jobs: they leave
``running`` at once (not a lease TTL later), announced, and a replacement
takes over; SIGTERM to the supervisor drains every child and it exits 0."""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from redrive import Actor, Admin, Client, JobRequest, Settings, Status
from redrive.store.sqlite.store import SQLiteStore
from redrive.testing import wait_for
from tests.apps.drain import app as drain_app
from tests.fakes.slack import slack_webhook
from tests.figures import record
from tests.integration.processes import WorkerProcess, executions

pytestmark = pytest.mark.slow


def _children(admin: Admin, supervisor: WorkerProcess) -> dict[str, int]:
    """Worker id -> pid of the supervisor's live children, as they registered."""
    workers, _ = admin.workers()
    return {w.id: w.pid for w in workers if w.supervisor == f"{socket.gethostname()}:{supervisor.pid}"}


def _supervised(url: str, tmp_path: Path, workers: list[WorkerProcess], *flags: str) -> tuple[Client, WorkerProcess]:
    """A client, and a supervisor of two worker processes of two slots each (and ``flags``)."""
    client = Client(drain_app.registry, settings=Settings.load(database_url=url))
    supervisor = WorkerProcess(url, tmp_path, "--processes", "2", "-c", "2", "--poll-interval", "0.05", *flags)
    workers.append(supervisor)
    return client, supervisor


def _all_running(db_url: str, tmp_path: Path, workers: list[WorkerProcess], count: int, sleep: dict,
                 *flags: str) -> tuple[Client, WorkerProcess, list]:
    """A supervisor of two worker processes (``flags``) running ``count`` sleeping jobs, all started."""
    client = Client(drain_app.registry, settings=Settings.load(database_url=db_url))
    supervisor = WorkerProcess(db_url, tmp_path, "--processes", "2", "--poll-interval", "0.1", *flags)
    workers.append(supervisor)
    ids = [r.job.id for r in client.enqueue_many(
        [JobRequest("sleep_then_record", kwargs={"key": f"k{n}", **sleep}) for n in range(count)])]
    wait_for(lambda: len(client.jobs(status=Status.RUNNING, limit=100).items) == count, timeout=60,
             what=f"{count} jobs running")
    return client, supervisor, ids


def test_a_killed_childs_jobs_leave_running_at_once_and_a_replacement_finishes_them(
        db_url: str, tmp_path: Path, workers: list[WorkerProcess]) -> None:
    # Given two worker processes of five slots each, and ten jobs that take a while the first time
    client, supervisor, ids = _all_running(db_url, tmp_path, workers, 10, {"seconds": 30, "first_attempt_only": True},
                                           "-c", "5", "--lease-ttl", "5s")
    with Admin.open(db_url, actor=Actor.operator("test")) as admin:
        children = wait_for(lambda: (found := _children(admin, supervisor)) and len(found) == 2 and found,
                            timeout=30, what="both children registered")
        doomed_id, doomed_pid = next(iter(children.items()))
        held = [j.id for j in client.jobs(status=Status.RUNNING, limit=100).items if j.lease_owner == doomed_id]
        assert len(held) == 5
        # When one child is SIGKILLed (its jobs' leases would last up to 5 s more)
        os.kill(doomed_pid, signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda: all(client.job(j).status is not Status.RUNNING for j in held), timeout=10, every=0.02,
                 what="the killed child's jobs out of running")
        out_s = time.monotonic() - killed
        record("a worker process SIGKILLed holding 5 jobs", "seconds until they left running", f"{out_s:.2f}", "< 2")
        assert out_s < 2
        # Then a replacement starts, and every job ends once, having run
        wait_for(lambda: len(_children(admin, supervisor)) >= 2 and doomed_id not in _children(admin, supervisor),
                 timeout=30, what="a replacement child")
    wait_for(lambda: all(client.job(j).status is Status.SUCCEEDED for j in held), timeout=60,
             what="the replacement finishing the killed child's jobs (attempts were left)")
    supervisor.kill()  # and its children: the other child's jobs, asleep, are taken back when their leases expire
    rest = WorkerProcess(db_url, tmp_path, "--poll-interval", "0.1", "-c", "10")
    workers.append(rest)
    wait_for(lambda: all(client.job(j).status is Status.SUCCEEDED for j in ids), timeout=60, what="all done")
    assert all(n == 1 for n in executions(tmp_path).values()) and len(executions(tmp_path)) == 10
    # And each taken-back job was announced by the supervisor
    for job_id in held:
        assert f"job.reclaimed job_id={job_id}" in supervisor.log
        events = client.job_events(job_id)
        assert any(e.meta.get("reason") == "worker_crashed" for e in events)
    client.close()


def test_sigterm_to_the_supervisor_drains_every_child_and_it_exits_0(
        db_url: str, tmp_path: Path, workers: list[WorkerProcess]) -> None:
    client, supervisor, ids = _all_running(db_url, tmp_path, workers, 4, {"seconds": 1.5},
                                           "-c", "2", "--shutdown-grace", "10s")
    # When the supervisor is told to stop mid-run
    asked = time.monotonic()
    supervisor.signal(signal.SIGTERM)
    # Then every child finishes what it holds, and the supervisor exits 0 within the grace
    assert supervisor.process.wait(timeout=30) == 0
    assert time.monotonic() - asked < 10
    assert all(client.job(j).status is Status.SUCCEEDED for j in ids)
    assert sorted(executions(tmp_path).values()) == [1, 1, 1, 1]
    assert "supervisor" in supervisor.log and "stopped" in supervisor.log
    client.close()


def test_children_that_keep_dying_at_start_up_stop_the_supervisor_with_one_line(
        sqlite_url: str, tmp_path: Path, workers: list[WorkerProcess]) -> None:
    # Given worker processes that die as soon as they claim a job (after the claim commits)
    client = Client(drain_app.registry, settings=Settings.load(database_url=sqlite_url))
    ids = [r.job.id for r in client.enqueue_many([JobRequest("record", args=[f"c{n}"]) for n in range(20)])]
    supervisor = WorkerProcess(sqlite_url, tmp_path, "--processes", "2", "--poll-interval", "0.1",
                               app="tests.apps.crashing:app", env={"REDRIVE_TEST_CRASH_AT": "claimed"})
    workers.append(supervisor)
    # Then the supervisor replaces them with a growing wait, gives up, and says so once
    assert supervisor.process.wait(timeout=90) == 1
    said = [line for line in supervisor.log.splitlines() if "keep dying at start-up" in line]
    assert len(said) == 1 and "redrive worker" in said[0], supervisor.log[-2000:]
    # And no job is left running: each death's leases were taken back (the last attempt's failed WORKER_CRASHED)
    assert not client.jobs(status=Status.RUNNING, limit=100).items
    taken = [j for j in ids if any(e.meta.get("reason") == "worker_crashed" for e in client.job_events(j))]
    assert taken  # every child died holding what it had just claimed
    assert all(client.job(j).error_code == "WORKER_CRASHED"
               for j in taken if client.job(j).status is Status.FAILED)
    client.close()


def test_children_are_recycled_after_their_jobs_and_no_job_is_lost_or_run_twice(
        db_url: str, tmp_path: Path, workers: list[WorkerProcess]) -> None:
    client = Client(drain_app.registry, settings=Settings.load(database_url=db_url))
    ids = [r.job.id for r in client.enqueue_many([JobRequest("record", args=[f"r{n}"]) for n in range(100)])]
    # When two worker processes are each replaced once they have run ten jobs
    supervisor = WorkerProcess(db_url, tmp_path, "--processes", "2", "-c", "2", "--max-jobs-per-child", "10",
                               "--poll-interval", "0.05")
    workers.append(supervisor)
    wait_for(lambda: all(client.job(j).status is Status.SUCCEEDED for j in ids), timeout=120, every=0.2,
             what="all 100 jobs done")
    # Then every job ran once, ten to a child, over ten children; or eleven,
    # when the two children still running as the queue emptied shared its last
    # ten jobs (each child that left had claimed exactly ten, so what those two
    # ran adds up to ten, and which of them claims each job is a race)
    ran = executions(tmp_path)
    assert len(ran) == 100 and set(ran.values()) == {1}
    per_child = sorted(len(path.read_text().splitlines()) for path in tmp_path.glob("exec-*.log"))
    assert per_child == [10] * 10 or (per_child[2:] == [10] * 9 and sum(per_child[:2]) == 10), per_child
    # (two children to start with, and one for each recycled: eight recycled, or more once the last leave)
    wait_for(lambda: supervisor.log.count("recycled after") >= 8, timeout=30, what="the recycled children logged")
    supervisor.signal(signal.SIGTERM)
    assert supervisor.process.wait(timeout=30) == 0
    client.close()


def _rss_of_children(supervisor_pid: int) -> dict[int, int]:
    """Resident bytes of each live child of ``supervisor_pid``, from /proc."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == supervisor_pid:
                found[int(stat.parent.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    return found


def test_a_run_past_its_hard_limit_has_its_child_killed_and_the_other_job_goes_back_refunded(
        pg_url: str, tmp_path: Path, workers: list[WorkerProcess]) -> None:
    # Given one worker process of two slots running a job that will sleep and one that spins for good
    client, supervisor = _supervised(pg_url, tmp_path, workers, "--queue", "default=2")
    with Admin.open(pg_url, actor=Actor.operator("test")) as admin:
        wait_for(lambda: len(_children(admin, supervisor)) == 2, timeout=30, what="both children registered")
        # (both jobs to one child: the other child's slots are taken by a pair of long sleepers first)
        other = client.enqueue_many([JobRequest("sleep_then_record", kwargs={"key": f"s{n}", "seconds": 4})
                                     for n in range(2)])
        wait_for(lambda: all(client.job(r.job.id).status is Status.RUNNING for r in other), timeout=30,
                 what="the first child busy")
        bystander, spinner = (r.job.id for r in client.enqueue_many([
            JobRequest("sleep_then_record", kwargs={"key": "bystander", "seconds": 2}),
            JobRequest("spin_first", args=["spinner"])]))
        wait_for(lambda: client.job(spinner).status is Status.RUNNING, timeout=30, every=0.02, what="spinning")
        spinning = time.monotonic()
        owner = client.job(spinner).lease_owner
        assert client.job(bystander).lease_owner == owner
        doomed_pid = _children(admin, supervisor)[owner]
        # When the spinner passes its hard limit of 1 s: its child is killed and replaced within 2 s
        wait_for(lambda: client.job(spinner).status is not Status.RUNNING, timeout=10, every=0.02,
                 what="the spinner's attempt ended")
        ended_s = time.monotonic() - spinning
        wait_for(lambda: not Path(f"/proc/{doomed_pid}").exists() and len(_rss_of_children(supervisor.pid)) == 2,
                 timeout=10, every=0.02, what="the killed child replaced")
        replaced_s = time.monotonic() - spinning
        record("a sync run past its hard limit of 1 s", "seconds from running to its child replaced",
               f"{replaced_s:.2f}", "< 3")
        assert ended_s < 3 and replaced_s < 3
    # Then its attempt failed TIMEOUT, and it retried and succeeded by its policy
    wait_for(lambda: client.job(spinner).status is Status.SUCCEEDED, timeout=60, what="the spinner's retry")
    first = [e for e in client.job_events(spinner) if e.attempt == 1 and e.to_status != "running"]
    assert first[-1].to_status in ("scheduled", "queued") and first[-1].meta.get("error_code") == "TIMEOUT", first
    # And the other job the killed child held went back with its attempt refunded, and ran once
    wait_for(lambda: client.job(bystander).status is Status.SUCCEEDED, timeout=60, what="the bystander done")
    assert any(e.meta.get("reason") == "worker_killed" for e in client.job_events(bystander))
    assert client.job(bystander).attempts == 1  # the refunded attempt is given back
    ran = executions(tmp_path)
    assert ran["bystander"] == 1 and ran["spinner"] == 1
    assert f"job {spinner} (spin_first) ran past its hard time limit of 1s" in supervisor.log
    client.close()


def test_a_thread_abandoned_at_the_soft_limit_still_has_its_child_killed_at_the_hard_one(
        db_url: str, tmp_path: Path, workers: list[WorkerProcess]) -> None:
    """A soft ``timeout=`` ends the run and abandons its thread; the hard
    limit is the limit nothing outlives, so the child holding that thread is
    killed once it passes it, and the orphaned thread shows until then."""
    client, supervisor = _supervised(db_url, tmp_path, workers, "--metrics-port", "0")
    url = wait_for(lambda: (m := re.search(r"metrics at (http://127\.0\.0\.1:\d+/metrics)", supervisor.log))
                   and m.group(1), timeout=30, what="the supervisor's metrics address")
    with Admin.open(db_url, actor=Actor.operator("test")) as admin:
        wait_for(lambda: len(_children(admin, supervisor)) == 2, timeout=30, what="both children registered")
        # Given a task with timeout=1s and hard_timeout=2s that sleeps for an hour
        job = client.enqueue_many([JobRequest("oversleep", args=[1.0])])[0].job.id
        wait_for(lambda: client.job(job).status is Status.RUNNING, timeout=30, every=0.02, what="it runs")
        started = time.monotonic()
        owner = client.job(job).lease_owner
        doomed = _children(admin, supervisor)[owner]
        # Then at the soft limit the job fails TIMEOUT and its thread runs on, orphaned, for the metrics to see
        wait_for(lambda: client.job(job).status is Status.FAILED, timeout=10, every=0.02, what="the soft limit")
        assert client.job(job).error_code == "TIMEOUT"
        shown = wait_for(lambda: _total(_scrape(url), "redrive_worker_orphaned_threads", worker=owner) == 1
                         or not Path(f"/proc/{doomed}").exists(), timeout=10, every=0.02,
                         what="the orphaned thread in the metrics")
        assert Path(f"/proc/{doomed}").exists(), "the child was killed before the metrics showed its orphan"
        # And at the hard limit its child is killed, within a second of it
        wait_for(lambda: not Path(f"/proc/{doomed}").exists(), timeout=10, every=0.02, what="the child killed")
        killed_s = time.monotonic() - started
        record("a thread abandoned at a soft limit of 1 s", "seconds from running to its child killed (hard 2 s)",
               f"{killed_s:.2f}", "< 3")
        assert shown and killed_s < 3
        # And a replacement runs the next job; the supervisor's metrics say why it replaced one
        wait_for(lambda: len(_children(admin, supervisor)) == 2 and owner not in _children(admin, supervisor),
                 timeout=30, what="a replacement child")
    after = client.enqueue_many([JobRequest("sleep_then_record", kwargs={"key": "after", "seconds": 0})])[0].job.id
    wait_for(lambda: client.job(after).status is Status.SUCCEEDED, timeout=30, what="the next job")
    samples = _scrape(url)
    assert _total(samples, "redrive_supervisor_replacements_total", reason="hard_time_limit") == 1
    assert _total(samples, "redrive_supervisor_worker_processes") == 2
    assert _total(samples, "redrive_worker_orphaned_threads") == 0  # the killed child's orphan went with it
    assert f"job {job} (oversleep) ran past its hard time limit of 2s" in supervisor.log
    assert client.job(job).attempts == 1 and client.job(job).status is Status.FAILED  # ended once, as TIMEOUT
    client.close()


def test_a_hard_limit_is_kept_while_the_supervisors_store_calls_wait(
        sqlite_url: str, tmp_path: Path, workers: list[WorkerProcess]) -> None:
    """The supervisor's store calls run beside its watch of the children: while
    taking back a dead child's jobs waits on a locked database, a run past its
    hard limit in the other child is still killed on time."""
    store = SQLiteStore(sqlite_url.removeprefix("sqlite:///"))
    store.migrate()
    store.close()
    client, supervisor = _supervised(sqlite_url, tmp_path, workers)
    with Admin.open(sqlite_url, actor=Actor.operator("test")) as admin:
        wait_for(lambda: len(_children(admin, supervisor)) == 2, timeout=30, what="both children registered")
        spinner = client.enqueue_many([JobRequest("spin_first", args=["spinner"])])[0].job.id
        wait_for(lambda: client.job(spinner).status is Status.RUNNING, timeout=30, every=0.02, what="spinning")
        spinning = time.monotonic()
        children = _children(admin, supervisor)
    doomed = children[client.job(spinner).lease_owner]
    (bystander,) = set(children.values()) - {doomed}
    # Given the database locked for writes, and the other child killed: taking its jobs back must wait
    lock = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), timeout=10, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    try:
        os.kill(bystander, signal.SIGKILL)
        # Then the spinner's child is killed past its limit of 1 s all the same
        wait_for(lambda: not Path(f"/proc/{doomed}").exists(), timeout=10, every=0.02, what="the spinner's child killed")
        killed_s = time.monotonic() - spinning
        record("a hard limit while the supervisor's store is locked", "seconds from running to its child killed",
               f"{killed_s:.2f}", "< 3")
        assert killed_s < 3
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    # And once the database is free again both children's jobs end as they should
    wait_for(lambda: client.job(spinner).status is Status.SUCCEEDED, timeout=60, what="the spinner's retry")
    first = [e for e in client.job_events(spinner) if e.attempt == 1 and e.to_status != "running"]
    assert first[-1].meta.get("error_code") == "TIMEOUT", first
    assert executions(tmp_path)["spinner"] == 1
    wait_for(lambda: re.search(r"worker process \d+ \(\S+\): 1 of its jobs taken back \(job \S+ failed TIMEOUT",
                               supervisor.log), timeout=30, what="the take-back logged")
    client.close()


def test_children_past_their_memory_limit_are_recycled_and_every_job_runs_once(
        sqlite_url: str, tmp_path: Path, workers: list[WorkerProcess]) -> None:
    client = Client(drain_app.registry, settings=Settings.load(database_url=sqlite_url))
    ids = [r.job.id for r in client.enqueue_many([JobRequest("hoard", args=[f"m{n}", 50]) for n in range(100)])]
    # When each job keeps 50 MiB for good, under a limit of 200 MB a child
    supervisor = WorkerProcess(sqlite_url, tmp_path, "--processes", "2", "-c", "1", "--max-memory-per-child",
                               "200MB", "--poll-interval", "0.05")
    workers.append(supervisor)
    highest = 0
    deadline = time.monotonic() + 180
    while not all(s is Status.SUCCEEDED for s in (client.job(j).status for j in ids)):
        assert time.monotonic() < deadline, "the 100 jobs did not finish"
        for _ in range(25):
            highest = max(highest, *_rss_of_children(supervisor.pid).values(), 0)
            time.sleep(0.02)
    # Then every job ran once, no child ever held more than the limit and one job's worth
    ran = executions(tmp_path)
    assert len(ran) == 100 and set(ran.values()) == {1}
    # (a job's worth: its 50 MiB, and a few more for what any run touches: its result, its log line)
    worth = 55 * 2**20
    record("children recycled by memory (50 MiB jobs, limit 200 MB)", "highest child RSS (MiB)",
           f"{highest / 2**20:.0f}", f"< {(200e6 + worth) / 2**20:.0f}")
    assert highest < 200e6 + worth
    children = len(list(tmp_path.glob("exec-*.log")))
    assert children >= 100 // 4, children  # three or four jobs to a child, then replaced
    assert supervisor.log.count("recycled after") >= children - 2
    # And `redrive workers` shows the supervisor, its children (pid, jobs run, memory) and why it replaced them
    supervisor_id = f"{socket.gethostname()}:{supervisor.pid}"
    with Admin.open(sqlite_url, actor=Actor.operator("test")) as admin:
        entry = wait_for(lambda: next((w for w in admin.workers()[0] if w.id == supervisor_id and w.restarts >= 20), None),
                         timeout=20, what="the supervisor's entry with its restarts")
        assert entry.children == 2 and entry.replaced
        assert all(r["why"].startswith("recycled: it uses ") and "past its limit of 191 MiB" in r["why"]
                   for r in entry.replaced), entry.replaced

    def listed() -> str | None:  # (a child started a moment ago has yet to register)
        text = subprocess.run([sys.executable, "-m", "redrive", "workers", "--database-url", sqlite_url],
                              capture_output=True, text=True, timeout=60, check=True).stdout
        return text if text.count(f"\n  {supervisor_id}.") == 2 else None

    listing = wait_for(listed, timeout=30, what="both children listed under the supervisor")
    lines = listing.splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith(supervisor_id))
    assert "2 procs" in lines[at] and "restarts" in lines[at]
    children_lines = [line for line in lines[at + 1:] if line.startswith(f"  {supervisor_id}.")]
    assert len(children_lines) == 2 and all(" MiB" in line for line in children_lines), listing
    assert "replaced pid" in listing and "recycled: it uses" in listing
    client.close()


def _scrape(url: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of a /metrics page: (name, labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url, timeout=10).text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _total(samples: dict, name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls)


def test_one_metrics_port_counts_every_childs_jobs_and_keeps_a_dead_childs_counts(
        pg_url: str, tmp_path: Path, workers: list[WorkerProcess]) -> None:
    client, supervisor = _supervised(pg_url, tmp_path, workers, "--metrics-port", "0")
    url = wait_for(lambda: (m := re.search(r"metrics at (http://127\.0\.0\.1:\d+/metrics)", supervisor.log))
                   and m.group(1), timeout=30, what="the supervisor's metrics address")
    # Given twenty jobs run by the two children (each a fifth of a second: one child alone would not take them all)
    with Admin.open(pg_url, actor=Actor.operator("test")) as admin:
        wait_for(lambda: len(_children(admin, supervisor)) == 2, timeout=30, what="both children registered")
    ids = [r.job.id for r in client.enqueue_many(
        [JobRequest("sleep_then_record", kwargs={"key": f"m{n}", "seconds": 0.2}) for n in range(20)])]
    wait_for(lambda: all(client.job(j).status is Status.SUCCEEDED for j in ids), timeout=60, what="all ran")
    ran_by = {client.job(j).result["pid"] for j in ids}
    # Then the one port counts all twenty, from both children (each reports within a second)
    wait_for(lambda: _total(_scrape(url), "redrive_jobs_completed_total", task="sleep_then_record",
                            outcome="succeeded") == 20, timeout=10, what="twenty successes counted")
    assert len(ran_by) == 2, ran_by
    assert _total(_scrape(url), "redrive_queue_jobs") == 0  # the store's gauges too, once
    # When a child holding a job is killed
    with Admin.open(pg_url, actor=Actor.operator("test")) as admin:
        held = client.enqueue_many([JobRequest("sleep_then_record", kwargs={"key": "held", "seconds": 30,
                                                                            "first_attempt_only": True})])[0].job.id
        wait_for(lambda: client.job(held).status is Status.RUNNING, timeout=30, what="the job running")
        os.kill(_children(admin, supervisor)[client.job(held).lease_owner], signal.SIGKILL)
    # Then its taken-back job is counted by the supervisor, and once another child has run it (the
    # other one may take it at once), the dead child's earlier successes still count beside it
    wait_for(lambda: _total(_scrape(url), "redrive_jobs_reclaimed_total") == 1, timeout=10, what="reclaim counted")
    wait_for(lambda: client.job(held).status is Status.SUCCEEDED, timeout=60, what="another child ran it")
    wait_for(lambda: _total(_scrape(url), "redrive_jobs_completed_total", task="sleep_then_record",
                            outcome="succeeded") == 21, timeout=10, what="the twenty and its success counted")
    client.close()


def test_a_job_whose_last_attempt_dies_with_its_child_is_notified_as_crashed(
        sqlite_url: str, tmp_path: Path, workers: list[WorkerProcess]) -> None:
    with slack_webhook() as slack:
        client = Client(drain_app.registry, settings=Settings.load(database_url=sqlite_url))
        supervisor = WorkerProcess(sqlite_url, tmp_path, "--processes", "2", "--poll-interval", "0.05",
                                   env={"REDRIVE_SLACK_WEBHOOK_URL": slack.url, "REDRIVE_NOTIFY_WINDOW": "1s"})
        workers.append(supervisor)
        job = client.enqueue_many([JobRequest("linger", args=[60])])[0].job.id
        wait_for(lambda: client.job(job).status is Status.RUNNING, timeout=30, what="the job running")
        with Admin.open(sqlite_url, actor=Actor.operator("test")) as admin:
            os.kill(_children(admin, supervisor)[client.job(job).lease_owner], signal.SIGKILL)
        # Then its only attempt fails WORKER_CRASHED at once, and the on-call hears of it once
        wait_for(lambda: client.job(job).status is Status.FAILED, timeout=10, what="the job failed")
        assert client.job(job).error_code == "WORKER_CRASHED"
        wait_for(lambda: slack.messages, timeout=30, what="a Slack message")
        time.sleep(2)  # a window, not a wait: a second message would come by then
        assert len(slack.messages) == 1 and "WORKER_CRASHED" in slack.messages[0] and "linger" in slack.messages[0]
        supervisor.kill()
        client.close()
