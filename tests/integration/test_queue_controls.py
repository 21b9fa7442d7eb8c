"""Queue controls across real worker processes: a pause every worker obeys
within a second, and per-queue limits inside a worker that are never exceeded."""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import pytest

from redrive import Actor, Admin, Client, JobRequest, Settings, Status
from redrive.testing import wait_for
from tests.apps.drain import app as drain_app
from tests.conftest import every_job
from tests.figures import record
from tests.integration.processes import WorkerProcess


def _client(db_url: str) -> Client:
    return Client(drain_app.registry, settings=Settings.load(database_url=db_url))


def _most_at_once(log_dir: Path) -> dict[str, int]:
    """Per queue, the most bodies that ran at the same time in one process."""
    spans: dict[tuple[str, str], list[tuple[float, int]]] = defaultdict(list)
    for path in log_dir.glob("span-*.log"):
        for line in path.read_text().splitlines():
            _key, queue, began, ended = line.split()
            spans[(path.name, queue)] += [(float(began), 1), (float(ended), -1)]
    most: dict[str, int] = defaultdict(int)
    for (_, queue), edges in spans.items():
        running = 0
        for _, step in sorted(edges, key=lambda edge: (edge[0], edge[1])):  # an end before a start at a tie
            running += step
            most[queue] = max(most[queue], running)
    return dict(most)


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_a_paused_queue_starts_nothing_on_any_worker_within_a_second_and_drains_when_resumed(
    db_url: str, tmp_path: Path, workers: list[WorkerProcess],
) -> None:
    client = _client(db_url)
    admin = Admin(client.store, actor=Actor.operator("ops:ana"))
    jobs = client.enqueue_many([JobRequest("span", kwargs={"key": f"k{i}", "seconds": 0.05}) for i in range(400)])
    workers += [WorkerProcess(db_url, tmp_path, "-c", "2", "--poll-interval", "0.2") for _ in range(3)]
    wait_for(lambda: len(every_job(client, status=Status.SUCCEEDED)) >= 20, timeout=30)
    # When an operator pauses the queue while the three workers drain it
    assert admin.pause_queue("default") is True
    paused_at = client.store.now()
    time.sleep(2.5)  # a window, not a wait: a start in it, a second after the pause, would be a defect
    # Then no job starts on any of them from a second after the pause
    started = [job.started_at for job in every_job(client) if job.started_at is not None]
    late = [at for at in started if at > paused_at + timedelta(seconds=1)]
    assert late == [] and len(started) < len(jobs)
    assert [q.paused_by for q in admin.queues()] == ["ops:ana"]
    # And when it is resumed they drain it
    assert admin.resume_queue("default") is True
    wait_for(lambda: len(every_job(client, status=Status.SUCCEEDED)) == len(jobs), timeout=60)
    logs = " ".join(worker.log for worker in workers)
    assert logs.count("queue default paused by ops:ana") == 3 and logs.count("queue default resumed") == 3
    client.close()


def test_per_queue_limits_inside_a_worker_are_never_exceeded(
    db_url: str, tmp_path: Path, workers: list[WorkerProcess],
) -> None:
    # Given 500 jobs on two queues, and a worker giving each its own limit
    client = _client(db_url)
    client.enqueue_many([JobRequest("span", kwargs={"key": f"k{i}", "seconds": 0.02},
                                    queue="email" if i % 2 else "default") for i in range(500)])
    workers.append(WorkerProcess(db_url, tmp_path, "--queue", "email=3", "--queue", "default=5",
                                 "--poll-interval", "0.2"))
    # When it drains them
    wait_for(lambda: len(every_job(client, status=Status.SUCCEEDED)) == 500, timeout=120)
    # Then, measured from the bodies' own start and end times, each queue kept
    # to its limit, and reached it (so the limit, not the load, held it there)
    assert _most_at_once(tmp_path) == {"email": 3, "default": 5}
    assert "queues=email=3,default=5 concurrency=8" in workers[0].log
    client.close()


def _most_in_any_window(starts: list[float], window_s: float) -> int:
    starts = sorted(starts)
    most, first = 0, 0
    for last, at in enumerate(starts):
        while starts[first] <= at - window_s:  # the window (at - window, at]
            first += 1
        most = max(most, last - first + 1)
    return most


def test_a_rate_and_a_global_concurrency_limit_hold_across_three_workers(
    db_url: str, tmp_path: Path, workers: list[WorkerProcess],
) -> None:
    # Given a queue limited to 40 starts per half second, and one limited to
    # 3 running at once, across all workers; 500 jobs on the first, 60 on the second
    from tests.apps.limited import app as limited

    client = Client(limited.registry, settings=Settings.load(database_url=db_url))
    # When three workers of 8 each, all started, drain them, each running at
    # most 2 gateway jobs: reaching 3 at once takes two of them, so the queue's
    # limit is held across processes, not by one that happened to win every
    # claim (a worker reclaims the slot it frees before the others poll)
    workers += [WorkerProcess(db_url, tmp_path, "-c", "8", "--poll-interval", "0.05", "--queue", "metered",
                              "--queue", "gateway=2", app="tests.apps.limited:app") for _ in range(3)]
    for worker in workers:
        worker.wait_started()
    client.enqueue_many([JobRequest("metered", args=[f"m{i}"]) for i in range(500)])
    client.enqueue_many([JobRequest("span", args=[f"g{i}", 0.05]) for i in range(60)])
    wait_for(lambda: len(every_job(client, status=Status.SUCCEEDED)) == 560, timeout=120)
    # Then no half second saw more than 40 starts (by the store's clock, from
    # each job's start), and the limit was reached, not merely unneeded
    starts = [job.started_at.timestamp() for job in every_job(client, queue="metered")]
    assert _most_in_any_window(starts, 0.5) == 40
    # And as an upstream would count them, at the tasks (docs/stopping-jobs.md):
    # each body began its claim's delay after its claim, so no window of half
    # a second less the spread of those delays saw more than 40 begin
    claimed = {str(job.id): job.started_at.timestamp() for job in every_job(client, queue="metered")}
    began = dict(line.split() for path in tmp_path.glob("metered-*.log") for line in path.read_text().splitlines())
    assert len(began) == 500
    delays = [float(at) - claimed[job_id] for job_id, at in began.items()]
    spread = max(delays) - min(delays)
    at_tasks = sorted(float(at) for at in began.values())
    record("a rate across three workers", "most starts at the tasks in any 0.5 s (Rate(40, per=0.5 s))",
           _most_in_any_window(at_tasks, 0.5), "40 + what the spread lets in")
    record("a rate across three workers", "spread of claim-to-start delays (ms)", f"{spread * 1000:.0f}")
    assert spread < 0.4  # tens of ms as a rule; a saturated machine held one body back 0.39 s
    assert _most_in_any_window(at_tasks, 0.5 - spread) <= 40
    # And never more than 3 gateway jobs ran at once, across the processes,
    # where three workers allowed 2 each could have run 6
    spans = []
    for path in tmp_path.glob("span-*.log"):
        for line in path.read_text().splitlines():
            _key, _queue, began, ended = line.split()
            spans += [(float(began), 1), (float(ended), -1)]
    running = most = 0
    for _, step in sorted(spans):
        running += step
        most = max(most, running)
    assert most == 3
    client.close()
