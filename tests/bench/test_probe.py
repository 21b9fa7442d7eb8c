"""The job's probe reads the process's CPU at the first job and then at
every 64th, not at each: the read cost a worker a tenth of the CPU it
measured. The CPU a job is the CPU between two readings over the jobs
between them."""

from __future__ import annotations

import importlib
import json

import pytest

from bench import harness, probe


def test_the_cpu_is_read_at_the_first_job_and_at_every_64th(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCH_PROBE_DIR", raising=False)  # no writer thread: the state is read here
    fresh = importlib.reload(probe)
    try:
        for _ in range(130):
            fresh.hit()
        state = json.loads(json.dumps(fresh._state))
        assert state["count"] == 130 and state["cpu_jobs"] == 128
        assert state["cpu_last"] >= state["cpu_first"] > 0
        (tmp_path / "1.json").write_text(json.dumps(state))
        workers = harness.Workers.__new__(harness.Workers)
        workers._dir = tmp_path
        [progress] = workers.progress()
        assert progress.count == 130 and progress.cpu_jobs == 127
        assert harness.cpu_us_per_job([progress]) == pytest.approx(
            (state["cpu_last"] - state["cpu_first"]) / 127 * 1e6)
    finally:
        importlib.reload(probe)


def test_a_process_that_ran_too_few_jobs_for_a_second_reading_gives_no_cpu_figure() -> None:
    few = harness.Progress(count=10, first=1.0, last=2.0, marks={}, latencies=[], cpu_s=None)
    many = harness.Progress(count=200, first=1.0, last=2.0, marks={}, latencies=[], cpu_s=0.002, cpu_jobs=191)
    assert harness.cpu_us_per_job([few, many]) == pytest.approx(0.002 / 191 * 1e6)
