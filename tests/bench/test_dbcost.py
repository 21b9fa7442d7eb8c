"""The database's work per job, as a regression guard: ``bench.dbcost`` on a
small N, redrive against the pgbench floor on a private server. Bytes of WAL,
index entries and commits per job do not drift with the machine the way
jobs per second do, so these are bounds on ratios and counts, not times."""

from __future__ import annotations

import os
from unittest import mock

import pytest

from bench import dbcost, dbcost_report, sqlitecost
from bench.dbcost_report import FLOOR, WHOLE, report, whole
from bench.harness import BenchError
from tests.conftest import IN_CI

JOBS = 2000
# Today's figures (bench/NOTES.md, 20,000 jobs a phase): the whole job 1.70x
# the floor's WAL (1.76x on this test's 2,000), 9 index entries, 0.005
# commits (before big batches went by COPY, the live table's columns were
# ordered for the claim and a new job's defaults were NULL: 1.88x; before
# the live table left room on its pages and a success's timings took
# columns: 2.01x; before running jobs left the newest-first index: 2.21x,
# 10; before the happy path's events were implied: 2.88x, 13). The bound is
# a little above today's: a change that writes more per job fails here.
WAL_OVER_FLOOR = 1.85
INDEX_ENTRIES = 9.5
COMMITS_PROCESSING = 0.01


def _redrive_and_floor(tmp_path, monkeypatch, request, *, counted: bool = False) -> dict:
    """Each phase of redrive's reliable profile and of the floor, on a private
    server; ``counted``: under callgrind, the whole job's phases alone."""
    try:
        cluster = dbcost.Cluster(counted=counted)
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
                results[subject.name] = dbcost.run(subject, meter, JOBS, (1,), whole_only=counted)
            finally:
                subject.close()
    finally:
        meter.close()
        cluster.close()
    return results


@pytest.mark.postgres
def test_a_job_writes_no_more_than_it_did(tmp_path, monkeypatch, request) -> None:
    results = _redrive_and_floor(tmp_path, monkeypatch, request)
    mine, floor = whole(results["redrive-pg"]), whole(results[FLOOR])
    assert mine is not None and floor is not None
    assert floor.per_job("wal_bytes") > 0 and floor.per_job("deleted") == pytest.approx(1, abs=0.02)
    assert mine.per_job("deleted") == pytest.approx(1, abs=0.02), "each job left the live table once"
    assert mine.wal_bytes / floor.wal_bytes <= WAL_OVER_FLOOR, (mine.per_job("wal_bytes"), floor.per_job("wal_bytes"))
    assert mine.per_job("index_entries") <= INDEX_ENTRIES
    assert results["redrive-pg"]["processing 1 worker"].per_job("commits") <= COMMITS_PROCESSING
    assert results["redrive-pg"]["enqueue 1/call"].per_job("commits") == pytest.approx(1, abs=0.05)
    # a batch's rows go by COPY, a page of them a WAL record; its four index entries a job are left
    # (5.1 records a job when each row was an INSERT's record of its own)
    batch = results["redrive-pg"]["enqueue 1000/call"]
    assert batch.per_job("inserted") == pytest.approx(1, abs=0.05) and batch.per_job("records") <= 4.3, batch.records
    # a heartbeat's lease extension is a HOT update: no index entry (migrations 0037, 0038); with the
    # lease's expiry indexed, each of the three wrote two
    beats = results["redrive-pg"][dbcost.HEARTBEATS]
    assert beats.per_job("updated") == pytest.approx(3, abs=0.02)
    assert beats.per_job("hot") >= 2.7 and beats.per_job("index_entries") <= 0.3, (beats.hot, beats.index_entries)
    text = report([results], jobs=JOBS, took_s=1)
    assert "| redrive-pg |" in text and "WAL ÷ floor" in text and "redrive_job" in text


# Counted in instructions (the server under callgrind, bench/callgrind.py), at this test's 2,000
# jobs the whole job is 2.59-2.62x the floor's in three runs (294 and 114 thousand instructions a
# job; at the report's 20,000, 2.4x: each connection's start weighs more on 2,000 jobs). Batch
# sizes follow timing, so the count moves by a percent or two, not by the machine's hour: the bound
# is 7 % above today's, and a change that makes the server do more for each job fails here.
INSTRUCTIONS_OVER_FLOOR = 2.8


@pytest.mark.postgres
def test_a_job_costs_the_server_no_more_instructions_than_it_did(tmp_path, monkeypatch, request) -> None:
    results = _redrive_and_floor(tmp_path, monkeypatch, request, counted=True)
    mine, floor = whole(results["redrive-pg"]), whole(results[FLOOR])
    assert mine is not None and floor is not None
    # what the floor's backends do for a job is some 100 thousand instructions: a count of 0, or of
    # the whole server's start, would be no measure
    assert 50_000 < floor.per_job("instructions") < 500_000, floor.per_job("instructions")
    assert mine.instructions / floor.instructions <= INSTRUCTIONS_OVER_FLOOR, (
        mine.per_job("instructions"), floor.per_job("instructions"))
    text = report([results], jobs=JOBS, took_s=1)
    assert "PG k instr" in text and "instructions ÷ floor" in text, text


# On SQLite (bench/results/2026-11-29-dbcost-implied-events.md): the whole job writes 10.3x the
# bare loop's bytes at 20,000 jobs (two runs agreed within 0.4 %) and 0.27x Huey's; at this
# test's 2,000, 10.9-11.2x in three runs (the claim's batches vary with timing).
SQLITE_BYTES_OVER_BARE = 12.5


def test_a_job_on_sqlite_writes_no_more_than_it_did(tmp_path) -> None:
    environ = mock.patch.dict(os.environ)  # the bench's redrive sets REDRIVE_DATABASE_URL for its workers
    with environ:
        uses = {}
        for make in (sqlitecost.redrive, sqlitecost.bare):
            subject = make(tmp_path)
            try:
                uses[subject.name] = sqlitecost.run(subject, JOBS)
            finally:
                subject.close()
    mine, bare = (sum(u[p].written for p in WHOLE) / JOBS for u in uses.values())
    assert bare > 0 and all(u["processing 1 worker"].cpu_s > 0 for u in uses.values())
    assert mine / bare <= SQLITE_BYTES_OVER_BARE, (mine, bare)
    assert "| the whole job |" in "\n".join(dbcost_report.sqlite_section(uses, 1e-4))
