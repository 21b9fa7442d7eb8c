"""The job's probe reads the process's CPU at the first job and then at
every 64th, not at each: the read cost a worker a tenth of the CPU it
measured. The CPU a job is the CPU between two readings over the jobs
between them."""

from __future__ import annotations

import importlib
import json

import pytest

from bench import harness, probe


def test_the_cpu_is_read_at_the_first_job_and_at_every_64th(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCH_PROBE_DIR", raising=False)  # no writer thread: the state is read here
    fresh = importlib.reload(probe)
    try:
        for _ in range(130):
            fresh.hit()
        state = json.loads(json.dumps(fresh._state))
        assert state["count"] == 130 and state["cpu_jobs"] == 128
        assert state["cpu_last"] >= state["cpu_first"] > 0
        progress = harness.progress_of(state)
        assert progress.count == 130 and progress.cpu_jobs == 127
        assert harness.cpu_us_per_job([progress]) == pytest.approx(
            (state["cpu_last"] - state["cpu_first"]) / 127 * 1e6)
    finally:
        importlib.reload(probe)


def test_a_process_with_no_second_reading_is_left_out_of_the_cpu_figure() -> None:
    few = harness.progress_of({"count": 10, "first": 1.0, "last": 2.0, "marks": {}, "lat": [], "cpu_first": 0.5,
                               "cpu_last": None, "cpu_jobs": None})
    assert (few.cpu_s, few.cpu_jobs) == (0.0, 0)
    many = harness.Progress(count=200, first=1.0, last=2.0, marks={}, latencies=[], cpu_s=0.002, cpu_jobs=191)
    assert harness.cpu_us_per_job([few, many]) == pytest.approx(0.002 / 191 * 1e6)
