"""``python -m bench.dbcost`` (or ``bench/run dbcost``): what PostgreSQL does
for each job, per system, on a private server (``bench/cluster.py``).

Jobs per second drift with the machine; bytes of WAL per job do not. Each
phase starts after a CHECKPOINT (so each first touch of a page writes its
full image, in every phase alike) and is read back from the WAL between two
LSNs with pg_waldump: bytes, records, full-page images, commits, heap rows
inserted, updated (HOT or not), deleted and locked, index entries, each
table's and index's share; the statements from pg_stat_statements; and the
server's CPU from ``/proc`` (its processes', and those that exited). With
``--instructions`` the server runs under callgrind and each phase also
counts the instructions its connections' backends executed
(``bench/callgrind.py``): a figure that does not move with the hour.

Phases: enqueue in batches of 1,000; enqueue one a call; processing a
backlog with 1, 2 and 4 worker processes (each timed from the workers'
start to their stop, their last endings written); and for redrive, what
a run of 30 seconds adds, its lease renewed three times by the heartbeat
(PgQueuer has no per-job lease to renew). Systems: redrive (each
profile), PgQueuer and the pgbench claim-and-archive floor (``floors.py``);
and on SQLite (``sqlitecost.py``) redrive, the bare SQLite loop and Huey.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from bench import floors, sqlitecost
from bench.activity import Sampler
from bench.cluster import Cluster, Record
from bench.harness import ROOT, BenchError, Workers
from bench.systems import base

BATCH = 1000
HEARTBEATS = "heartbeats of a 30 s run (3 lease extensions)"
WATCHED = 8  # processing phases with this many workers or more also sample lock waits
_SERVER_PROCESSES = ("checkpointer", "background writer", "walwriter", "autovacuum launcher",
                     "logical replication launcher", "archiver", "startup")
_INDEX_ENTRY = {"Btree/INSERT_LEAF", "Btree/INSERT_POST", "Btree/SPLIT_L", "Btree/SPLIT_R", "Btree/NEWROOT"}


@dataclass
class Cost:
    """What the server did in one phase, for ``jobs`` jobs."""

    jobs: int
    wal_bytes: int = 0
    records: int = 0
    fpi: int = 0
    commits: int = 0
    inserted: int = 0
    updated: int = 0
    hot: int = 0
    deleted: int = 0
    locked: int = 0
    index_entries: int = 0
    statements: int = 0
    cpu_s: float = 0.0
    instructions: int = 0  # the backends', counted by callgrind (``--instructions``)
    seconds: float = 0.0
    watched: bool = False  # the two below were sampled (their queries cost the server CPU: 8 workers only)
    lock_wait_s: float = 0.0  # backends waiting on a lock, summed over the phase (sampled)
    idle_in_transaction_s: float = 0.0  # backends idle inside a transaction: a lock may be held across a round trip
    by_relation: Counter = field(default_factory=Counter)  # WAL bytes by table or index name
    by_statement: Counter = field(default_factory=Counter)  # seconds executing, by statement (pg_stat_statements)

    def add(self, record: Record, names: dict[int, str]) -> None:
        self.wal_bytes += record.size
        self.records += 1
        self.fpi += record.fpi
        kind = record.kind.removesuffix("+INIT")  # +INIT: the record's page is new
        self.commits += kind == "Transaction/COMMIT"
        self.inserted += record.rows if kind in ("Heap/INSERT", "Heap2/MULTI_INSERT") else 0
        self.updated += kind in ("Heap/UPDATE", "Heap/HOT_UPDATE")
        self.hot += kind == "Heap/HOT_UPDATE"
        self.deleted += kind == "Heap/DELETE"
        self.locked += kind in ("Heap/LOCK", "Heap2/LOCK_UPDATED")
        self.index_entries += kind in _INDEX_ENTRY
        where = names.get(record.relation, "(other)") if record.relation is not None else f"({kind.split('/')[0]})"
        self.by_relation[where] += record.size

    def per_job(self, name: str) -> float:
        return getattr(self, name) / self.jobs

    def __add__(self, other: Cost) -> Cost:
        total = Cost(self.jobs)
        for each in dataclasses.fields(self):
            if each.name not in ("jobs", "watched"):
                setattr(total, each.name, getattr(self, each.name) + getattr(other, each.name))
        return total


class Meter:
    """Phases measured on a private cluster, each against its system's database."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._admin = psycopg.connect(f"{cluster.server}/postgres", autocommit=True)
        self._admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")

    def measure(self, subject: Subject, jobs: int, phase: Callable[[], None], *, watch: bool = False) -> Cost:
        database, counter = subject.database, self.cluster.instructions
        self._admin.execute("CHECKPOINT")
        start, statements, cpu = self._lsn(), self._statements(database), self.cluster.cpu_s()
        executing = self._executing(database)
        if counter is not None:  # each backend's count comes as it exits: none open across the phase's ends
            subject.disconnect()
            counter.mark(self._transient)
        began = time.perf_counter()
        sampler = Sampler(self.cluster, database) if watch and counter is None else None
        if sampler is None:
            phase()
        else:
            with sampler:
                phase()
        cost = Cost(jobs, seconds=time.perf_counter() - began)
        if counter is not None:
            subject.disconnect()
            cost.instructions = counter.count(self._transient)
        if sampler is not None:
            cost.watched, cost.lock_wait_s, cost.idle_in_transaction_s = True, sampler.lock_wait_s, sampler.idle_s
        cost.cpu_s = self.cluster.cpu_s() - cpu
        cost.statements = self._statements(database) - statements
        cost.by_statement = self._executing(database) - executing
        end = self._lsn()
        self._admin.execute("CHECKPOINT")  # the WAL up to ``end`` on disk for pg_waldump
        names = self._relations(database)
        for record in self.cluster.records(start, end):
            cost.add(record, names)
        return cost

    def _transient(self) -> list[int]:
        """The server's processes that are backends of a connection (this
        meter's own excepted): those a phase opened, until they have exited."""
        resident = {pid for (pid,) in self._admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = ANY(%s) OR pid = pg_backend_pid()",
            (list(_SERVER_PROCESSES),))}
        return [pid for pid in self.cluster.pids()[1:] if pid not in resident]

    def vacuum(self, database: str) -> None:
        with psycopg.connect(f"{self.cluster.server}/{database}", autocommit=True) as conn:
            conn.execute("VACUUM")

    def _lsn(self) -> str:
        return self._admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]

    def _statements(self, database: str) -> int:
        row = self._admin.execute("SELECT coalesce(sum(s.calls), 0) FROM pg_stat_statements AS s "
                                  "JOIN pg_database AS d ON d.oid = s.dbid WHERE d.datname = %s",
                                  (database,)).fetchone()
        return int(row[0])

    def _executing(self, database: str) -> Counter:
        """Seconds spent executing each statement so far, by its name."""
        rows = self._admin.execute("SELECT s.query, s.total_exec_time FROM pg_stat_statements AS s "
                                   "JOIN pg_database AS d ON d.oid = s.dbid WHERE d.datname = %s", (database,))
        spent: Counter = Counter()
        for query, ms in rows:
            spent[statement_name(query)] += ms / 1000
        return spent

    def _relations(self, database: str) -> dict[int, str]:
        names: dict[int, str] = {}
        for db in ("postgres", database):
            with psycopg.connect(f"{self.cluster.server}/{db}") as conn:
                names.update(conn.execute("SELECT pg_relation_filenode(oid), relname FROM pg_class "
                                          "WHERE pg_relation_filenode(oid) IS NOT NULL").fetchall())
        return names

    def close(self) -> None:
        self._admin.close()


def _shape(sql: str) -> str:
    """A statement's first words without comments, each parameter or constant
    as ``?``: how psycopg sends one of redrive's named statements and how
    pg_stat_statements keeps it (constants as $n) read alike."""
    text = " ".join(re.sub(r"--[^\n]*", " ", sql).split())
    return re.sub(r"\$\d+|%\(\w+\)s|'[^']*'|\b\d+\b", "?", text)[:100]


def _redrive_names() -> dict[str, str]:
    from redrive.store.sql import load_queries

    queries = load_queries("redrive.store.postgres", dialect="postgres")
    return {_shape(sql.replace("%%", "%")): name for name, sql in queries.items()}


_NAMES: dict[str, str] = {}


def statement_name(query: str) -> str:
    """redrive's name for a statement it runs (``jobs_claim``...); any other
    system's, its first words."""
    if not _NAMES:
        _NAMES.update(_redrive_names())
    shape = _shape(query)
    return _NAMES.get(shape) or shape[:60]


@dataclass
class Subject:
    """A system as the meter drives it: its database, its enqueue, its workers, its queue's table."""

    name: str
    database: str
    reset: Callable[[], None]
    enqueue: Callable[[int, int], None]
    process: Callable[[int, int], None]  # (jobs, worker processes): until every job has ended
    close: Callable[[], None]
    heartbeats: Callable[[int], Callable[[], None]] | None = None  # (jobs) claimed: the phase that renews them
    disconnect: Callable[[], None] = lambda: None  # closes what ``enqueue`` keeps open (reopened on next use)


def _workers_drain(argv: Callable[[], list[str]], left: Callable[[], int]) -> Callable[[int, int], None]:
    def process(jobs: int, count: int) -> None:
        with Workers(argv(), count) as workers:
            workers.wait(jobs, budget_s=float("inf"), timeout_s=600)
            # PgQueuer writes its last endings on a timer, and SIGTERM ends its worker without
            # them: the stop waits for them (on a slow server, callgrind's, the timer came late)
            deadline = time.monotonic() + 60
            while left() and time.monotonic() < deadline:
                time.sleep(0.1)
        if (remaining := left()) != 0:  # stopped: their last endings are written, or this says so
            raise BenchError(f"{remaining} jobs still in the queue after the workers stopped")
    return process


def _count(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def redrive(profile: str, workdir: Path) -> Subject:
    from bench.systems.redrive import Redrive

    system = Redrive("pg", workdir, profile=profile)
    return Subject(system.name, "bench_redrive", system.reset, system.enqueue,
                   _workers_drain(system.worker_argv, lambda: _count(system.url, "redrive_job")), system.close,
                   system.heartbeats, system.disconnect)


def pgqueuer() -> Subject:
    from bench.systems import pgqueuer as pgqueuer_system
    from bench.systems.pgqueuer import PgQueuer

    system = PgQueuer()
    os.environ[pgqueuer_system.AGGREGATE_S] = "0"  # the targets compare it without its later aggregation
    return Subject(system.name, "bench_pgqueuer", system.reset, system.enqueue,
                   _workers_drain(system.worker_argv, lambda: _count(system.url, "pgqueuer")), system.close,
                   disconnect=system.close)


def floor(cluster: Cluster, workdir: Path) -> Subject:
    """pgbench's claim of 100 and archive (``floors.py``), one client per worker; its enqueues from psycopg."""
    url = f"{cluster.server}/bench_floor"
    script = workdir / "claim.sql"
    script.write_text(floors.CLAIM_AND_ARCHIVE)

    def reset() -> None:
        base.fresh_database("bench_floor")
        floors.fresh(url)

    def enqueue(n: int, batch: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            for done in range(0, n, batch):
                size = min(batch, n - done)
                if size == 1:
                    conn.execute(floors.INSERT)
                else:
                    conn.execute("INSERT INTO job (queue, payload, status) "
                                 "SELECT 'default', '{}', 'queued' FROM generate_series(1, %s)", (size,))

    def process(jobs: int, count: int) -> None:
        cycles = -(-jobs // 100 // count) + 1  # each client's share, and one that finds nothing
        subprocess.run([cluster.tool("pgbench"), "--no-vacuum", "--protocol=prepared", f"--client={count}",
                        f"--jobs={count}", f"--transactions={cycles}", f"--file={script}", url],
                       check=True, capture_output=True, timeout=600)
        if (left := _count(url, "job")) != 0:
            raise BenchError(f"the floor left {left} jobs")

    return Subject("floor: pgbench claim-100-and-archive", "bench_floor", reset, enqueue, process, lambda: None)


def run(subject: Subject, meter: Meter, jobs: int, workers: tuple[int, ...], *, whole_only: bool = False,
        ) -> dict[str, Cost]:
    """Every phase; ``whole_only``: the whole job's two (batch enqueue, processing)."""
    costs: dict[str, Cost] = {}
    subject.reset()
    costs["enqueue 1000/call"] = meter.measure(subject, jobs, lambda: subject.enqueue(jobs, BATCH))
    for n, count in enumerate(workers):
        if n:  # the first drains what the batch phase enqueued
            subject.enqueue(jobs, BATCH)
        costs[f"processing {count} worker{'s' if count > 1 else ''}"] = meter.measure(
            subject, jobs, lambda count=count: subject.process(jobs, count), watch=count >= WATCHED)
    if whole_only:
        return costs
    single = max(1, jobs // 10)
    # what autovacuum does after a drain, before the next jobs come one by one: without it, where
    # each insert lands (and whether it is a page's first write since the checkpoint) followed
    # where the previous phase's updates happened to leave room
    meter.vacuum(subject.database)
    costs["enqueue 1/call"] = meter.measure(subject, single, lambda: subject.enqueue(single, 1))
    # what a run of 30 s adds: its leases renewed three times (not counted in instructions: the
    # leases are claimed on a connection that stays open for the phase)
    if subject.heartbeats is not None and meter.cluster.instructions is None:
        subject.enqueue(jobs, BATCH)
        costs[HEARTBEATS] = meter.measure(subject, jobs, subject.heartbeats(jobs))
    return costs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dbcost", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs a phase (one a call: a tenth)")
    parser.add_argument("--workers", default="1,2,4,8", help="worker processes of each processing phase")
    parser.add_argument("--systems", default="redrive,redrive-minimal,pgqueuer,floor,redrive-sqlite,bare-sqlite,huey")
    parser.add_argument("--repeats", type=int,
                        help="runs of each PostgreSQL system, taking turns (CPU figures: their medians); "
                             "default 3, or 1 with --instructions")
    parser.add_argument("--instructions", action="store_true",
                        help="run the server under callgrind and count its backends' instructions "
                             "(bench/callgrind.py): the same figure run after run, many times slower")
    parser.add_argument("--out", type=Path, help="Markdown report (default bench/results/DATE-dbcost.md)")
    args = parser.parse_args(argv)
    from bench.dbcost_report import report

    workers = tuple(int(w) for w in args.workers.split(","))
    cluster = Cluster(counted=args.instructions)
    workdir = Path(tempfile.mkdtemp(prefix="redrive-dbcost-work-"))
    base.PG_SERVER = cluster.server  # every system's fresh database on the private server
    os.environ["BENCH_PG"] = cluster.server
    made = {"redrive": lambda: redrive("reliable", workdir), "redrive-minimal": lambda: redrive("minimal", workdir),
            "redrive-limits": lambda: redrive("limits", workdir), "pgqueuer": pgqueuer,
            "floor": lambda: floor(cluster, workdir)}
    repeats = args.repeats or (1 if args.instructions else 3)
    runs: list[dict[str, dict[str, Cost]]] = [{} for _ in range(max(1, repeats))]
    on_sqlite: dict[str, dict[str, sqlitecost.Use]] = {}
    fsync_s = 0.0
    started = time.monotonic()
    meter: Meter | None = None
    try:
        meter = Meter(cluster)
        names = args.systems.split(",")
        if unknown := [n for n in names if n not in made and n not in sqlitecost.SYSTEMS]:
            raise BenchError(f"unknown system {unknown[0]!r} (one of {', '.join([*made, *sqlitecost.SYSTEMS])})")
        # the PostgreSQL systems take turns, so that the machine's hour weighs on each alike
        for n, results in enumerate(runs):
            for name in [x for x in names if x in made]:
                subject = made[name]()
                print(f"[{time.monotonic() - started:6.0f}s] {subject.name} ({n + 1}/{len(runs)})",
                      file=sys.stderr, flush=True)
                try:
                    results[subject.name] = run(subject, meter, args.jobs, workers)
                finally:
                    subject.close()
        for name in [x for x in names if x in sqlitecost.SYSTEMS]:  # bytes written: one run says it
            fsync_s = fsync_s or sqlitecost.fsync_s(workdir)
            lite = sqlitecost.SYSTEMS[name](workdir)
            print(f"[{time.monotonic() - started:6.0f}s] {lite.name}", file=sys.stderr, flush=True)
            try:
                on_sqlite[lite.name] = sqlitecost.run(lite, args.jobs)
            finally:
                lite.close()
    except BenchError as exc:
        print(f"bench.dbcost: {exc}", file=sys.stderr)
        return 1
    finally:
        if meter is not None:
            meter.close()
        cluster.close()
        shutil.rmtree(workdir, ignore_errors=True)
    text = report(runs, jobs=args.jobs, took_s=time.monotonic() - started, sqlite=on_sqlite, fsync_s=fsync_s)
    out = args.out or ROOT / "bench" / "results" / f"{datetime.now(UTC):%Y-%m-%d}-dbcost.md"
    out.write_text(text)
    print(text)
    print(f"written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
