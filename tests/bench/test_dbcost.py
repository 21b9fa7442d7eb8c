"""The database's work per job, as a regression guard: ``bench.dbcost`` on a
small N, redrive against the pgbench floor on a private server. Bytes of WAL,
index entries and commits per job do not drift with the machine the way
jobs per second do, so these are bounds on ratios and counts, not times."""

from __future__ import annotations

import os
from unittest import mock

import pytest

from bench import dbcost
from bench.dbcost_report import FLOOR, report, whole
from bench.harness import BenchError
from tests.conftest import IN_CI

JOBS = 2000
# Today's figures (bench/results/2026-11-29-dbcost-implied-events.md, 20,000
# jobs a phase): the whole job 2.21x the floor's WAL, 10 index entries, 0.005
# commits (before the happy path's events were implied: 2.88x, 13).
# A bound a little above each: a change that writes more per job fails here.
WAL_OVER_FLOOR = 2.4
INDEX_ENTRIES = 10.5
COMMITS_PROCESSING = 0.01


@pytest.mark.postgres
def test_a_job_writes_no_more_than_it_did(tmp_path, monkeypatch, request) -> None:
    try:
        cluster = dbcost.Cluster()
    except BenchError as exc:  # as tests/cluster.py: a failure in CI, skipped elsewhere
        (pytest.fail if IN_CI else pytest.skip)(str(exc))
    monkeypatch.setattr(dbcost.base, "PG_SERVER", cluster.server)
    monkeypatch.setenv("BENCH_PG", cluster.server)
    # the bench's redrive sets REDRIVE_DATABASE_URL and others for its workers: all put back after
    environ = mock.patch.dict(os.environ)
    environ.start()
    request.addfinalizer(environ.stop)
    meter = dbcost.Meter(cluster)
    results = {}
    try:
        for subject in (dbcost.redrive("reliable", tmp_path), dbcost.floor(cluster, tmp_path)):
            try:
                results[subject.name] = dbcost.run(subject, meter, JOBS, (1,))
            finally:
                subject.close()
    finally:
        meter.close()
        cluster.close()
    mine, floor = whole(results["redrive-pg"]), whole(results[FLOOR])
    assert mine is not None and floor is not None
    assert floor.per_job("wal_bytes") > 0 and floor.per_job("deleted") == pytest.approx(1, abs=0.02)
    assert mine.per_job("deleted") == pytest.approx(1, abs=0.02), "each job left the live table once"
    assert mine.wal_bytes / floor.wal_bytes <= WAL_OVER_FLOOR, (mine.per_job("wal_bytes"), floor.per_job("wal_bytes"))
    assert mine.per_job("index_entries") <= INDEX_ENTRIES
    assert results["redrive-pg"]["processing 1 worker"].per_job("commits") <= COMMITS_PROCESSING
    assert results["redrive-pg"]["enqueue 1/call"].per_job("commits") == pytest.approx(1, abs=0.05)
    text = report(results, jobs=JOBS, took_s=1)
    assert "| redrive-pg |" in text and "WAL ÷ floor" in text and "redrive_job" in text
