"""The floors under redrive's PostgreSQL figures: what this machine's
PostgreSQL and its driver allow with no queue library in the way, measured
in every repeat beside the systems (machines drift; only same-run ratios
count).

- ``pgbench``: two clients claiming 100 due jobs (``FOR UPDATE SKIP
  LOCKED``, marked running in one transaction) and moving them to a history
  table (a second), as a worker claims and finishes; and one client
  inserting one row a transaction, as a single enqueue does. The SQL is the
  bench's own, run by the ``pgbench`` that ships with PostgreSQL.
- ``psycopg loop``: the same one-row insert and commit from Python through
  psycopg, prepared after its first calls, as the least any Python enqueue
  can cost; and two Python processes running pgbench's claim-and-archive
  cycle through psycopg, each decoding every claimed job's payload and
  calling a no-op with it: the least any Python worker can cost, so the
  share of pgbench's rate a Python worker could reach on this machine.

Both use the same durability as redrive (``synchronous_commit`` as the
server has it) and a due-jobs index like redrive's.

- ``redrive's store alone``: redrive's own claim and ending, called straight
  on its store (PostgreSQL from two processes, SQLite from one) with no
  worker around them: claim up to 500 due no-ops (the most a bench worker
  claims at once), write their successes, again (on PostgreSQL the next
  claim runs while the last batch is written, on a second connection, as a
  worker's do; SQLite has one writer). Every guarantee a worker
  keeps is in those two calls (fenced leases, the history row, the claim's
  and the ending's events, the rollups), and a worker makes the same calls
  and more, so none on redrive's store passes this rate but by the
  machine's scatter: what it leaves of a target is what the statements
  themselves cost, not the worker.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from bench.harness import BenchError
from bench.systems.base import fresh_database

_SCHEMA = """
CREATE TABLE job (id bigserial PRIMARY KEY, queue text NOT NULL, payload jsonb NOT NULL,
                  status text NOT NULL, run_at timestamptz NOT NULL DEFAULT now(), worker int);
CREATE INDEX job_due ON job (queue, run_at) WHERE status = 'queued';
CREATE INDEX job_running ON job (worker) WHERE status = 'running';
CREATE TABLE job_done (LIKE job INCLUDING DEFAULTS, finished_at timestamptz NOT NULL DEFAULT now(),
                       PRIMARY KEY (id));
"""
# One worker's cycle: claim a batch (one transaction), then finish it (another).
CLAIM_AND_ARCHIVE = """
UPDATE job SET status = 'running', worker = :client_id
WHERE id IN (SELECT id FROM job WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
             ORDER BY run_at LIMIT 100 FOR UPDATE SKIP LOCKED);
WITH done AS (DELETE FROM job WHERE worker = :client_id AND status = 'running' RETURNING *)
INSERT INTO job_done (id, queue, payload, status, run_at, worker)
SELECT id, queue, payload, 'succeeded', run_at, worker FROM done;
"""
# The same cycle from Python: the claim answers each job's payload for the no-op.
_CLAIM = """
UPDATE job SET status = 'running', worker = %s
WHERE id IN (SELECT id FROM job WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
             ORDER BY run_at LIMIT 100 FOR UPDATE SKIP LOCKED)
RETURNING id, payload
"""
_ARCHIVE = """
WITH done AS (DELETE FROM job WHERE worker = %s AND status = 'running' RETURNING *)
INSERT INTO job_done (id, queue, payload, status, run_at, worker)
SELECT id, queue, payload, 'succeeded', run_at, worker FROM done
"""
INSERT = "INSERT INTO job (queue, payload, status) VALUES ('default', '{}', 'queued');\n"
# The least a job of redrive's own table holds: what its NOT NULL columns need, no event, no wake-up.
_JOB_ROW = """
INSERT INTO redrive_job (id, task, queue, args, kwargs, status, priority, run_at, attempts, max_attempts,
                         created_at, updated_at)
VALUES (%s, 'noop', 'default', '[]', '{}', 'queued', 0, now(), 0, 3, now(), now())
"""
_TPS = re.compile(r"^tps = ([\d.]+)", re.MULTILINE)


def fresh(url: str, backlog: int = 0) -> None:
    """The floors' tables, empty or with ``backlog`` due jobs."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS job, job_done")
        conn.execute(_SCHEMA)
        if backlog:
            conn.execute("INSERT INTO job (queue, payload, status) "
                         "SELECT 'default', '{}', 'queued' FROM generate_series(1, %s)", (backlog,))
        conn.execute("VACUUM ANALYZE job")


class Floors:
    """Not a system: its row holds what the hardware allows, in the columns
    the systems fill (``enqueue 1/call``, ``jobs/s 2 proc``)."""

    name = "floor: pgbench (SQL only)"

    def __init__(self) -> None:
        if shutil.which("pgbench") is None:
            raise BenchError("pgbench is not on PATH (it ships with PostgreSQL's server package)")
        self.url = fresh_database("bench_floor")
        self._dir = Path(tempfile.mkdtemp(prefix="redrive-bench-floor-"))
        (self._dir / "claim.sql").write_text(CLAIM_AND_ARCHIVE)
        (self._dir / "insert.sql").write_text(INSERT)

    def _pgbench(self, script: str, clients: int, seconds: float) -> float:
        """Transactions per second over ``seconds``, as pgbench prints them."""
        run = subprocess.run(
            ["pgbench", "--no-vacuum", "--protocol=prepared", f"--client={clients}", f"--jobs={clients}",
             f"--time={max(1, round(seconds))}", f"--file={self._dir / script}", self.url],
            capture_output=True, text=True, timeout=seconds + 120)
        found = _TPS.search(run.stdout)
        if run.returncode != 0 or found is None:
            raise BenchError(f"pgbench failed: {(run.stderr or run.stdout).strip().splitlines()[-1:]}")
        return float(found.group(1))

    def claim_and_archive(self, backlog: int, seconds: float) -> float:
        """Jobs/s of two clients claiming and archiving: the jobs moved over
        the run's time (a cycle of pgbench's is two statements, so its own
        rate counts cycles, not jobs; the backlog outlasts the run)."""
        fresh(self.url, backlog)
        started = time.perf_counter()
        self._pgbench("claim.sql", 2, seconds)
        took = time.perf_counter() - started
        with psycopg.connect(self.url) as conn:
            moved = conn.execute("SELECT count(*) FROM job_done").fetchone()[0]
        if moved >= backlog:
            raise BenchError(f"the claim floor ran out of jobs ({backlog:,}): give it a bigger backlog")
        return moved / took

    def insert(self, seconds: float) -> float:
        """One-row inserts a second from one pgbench client, each its own transaction."""
        fresh(self.url)
        return self._pgbench("insert.sql", 1, seconds)

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


class PsycopgLoop:
    """The least a Python single enqueue can cost: psycopg, one INSERT and
    its commit per call, on the floors' table."""

    name = "floor: psycopg loop (Python)"

    def __init__(self) -> None:
        self.url = fresh_database("bench_floor_psycopg")

    def insert(self, n: int) -> float:
        fresh(self.url)
        with psycopg.connect(self.url, autocommit=True) as conn:
            started = time.perf_counter()
            for _ in range(n):
                conn.execute("INSERT INTO job (queue, payload, status) VALUES (%s, %s, 'queued')",
                              ("default", "{}"))
            return n / (time.perf_counter() - started)

    def claim_and_archive(self, backlog: int, seconds: float) -> float:
        """Jobs/s of two Python processes running the claim-and-archive
        cycle over the same ``seconds`` (they start together once both have
        connected; start-up is not counted)."""
        fresh(self.url, backlog)
        return _together(["psycopg", self.url], 2, backlog, seconds, "Python claim")[0]

    def close(self) -> None:
        pass


class JobTableLoop:
    """The psycopg loop, each call writing one bare row into redrive's own
    job table: its primary key and the indexes the claim and the pages read,
    with none of what an enqueue adds (the creation event, the workers'
    wake-up). What a single enqueue into that table costs at the least."""

    name = "floor: psycopg loop into redrive's job table"

    def __init__(self) -> None:
        from redrive.store.url import open_store

        self.url = fresh_database("bench_floor_jobtable")
        store = open_store(self.url, check_schema=False)
        try:
            store.migrate()
        finally:
            store.close()

    def insert(self, n: int) -> float:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("TRUNCATE redrive_job CASCADE")
            # ids rising with time, as redrive's UUIDv7 ones do: each lands at the end of the key's index
            first = (time.time_ns() // 1_000_000) << 80
            started = time.perf_counter()
            for i in range(n):
                conn.execute(_JOB_ROW, (f"{first + i:032x}",))
            return n / (time.perf_counter() - started)

    def close(self) -> None:
        pass


class StoreLoop:
    """redrive's store alone: its claim and its ending in a loop (above)."""

    BATCH = 500  # bench.systems.redrive.CONCURRENCY: the most one claim of a bench worker takes

    def __init__(self, backend: str, workdir: Path) -> None:
        self.backend = backend
        self.name = f"floor: redrive's store alone ({'PostgreSQL' if backend == 'pg' else 'SQLite'})"
        self._workdir = workdir

    def _fresh(self, backlog: int) -> str:
        """A new database holding ``backlog`` due no-ops, enqueued as the bench's redrive systems do."""
        from bench.systems.redrive_jobs import make_app
        from redrive import JobRequest
        from redrive.store.url import open_store

        if self.backend == "pg":
            url = fresh_database("bench_floor_store")
        else:
            path = self._workdir / "floor-store.db"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            url = f"sqlite:///{path}"
        store = open_store(url, check_schema=False)
        try:
            store.migrate()
        finally:
            store.close()
        app = make_app(url, "minimal")
        try:
            for done in range(0, backlog, 1000):
                app.enqueue_many([JobRequest("noop")] * min(1000, backlog - done))
        finally:
            app.close()
        return url

    def claim_and_finish(self, processes: int, backlog: int, seconds: float) -> tuple[float, float]:
        """Jobs/s of ``processes`` loops over the same ``seconds`` (they start
        together once each has opened its store; start-up is not counted), and
        their own CPU a job in µs: what a worker's process spends on its store
        alone, beside the bench's CPU µs/job of the workers."""
        url = self._fresh(backlog)
        return _together(["store", url], processes, backlog, seconds, "redrive's store alone")

    def close(self) -> None:
        pass


def _together(argv: list[str], processes: int, backlog: int, seconds: float, what: str) -> tuple[float, float]:
    """Jobs/s of ``processes`` runs of this module's ``argv`` loop, started
    together once every one is ready (imported, connected) and stopped
    together ``seconds`` later, and the CPU the processes spent a job over
    those seconds, in µs. (A fixed head start was too short for a loaded
    machine: a loop that began after the end moved nothing.)"""
    children = [subprocess.Popen([sys.executable, "-m", "bench.floors", *argv, str(client)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for client in range(1, processes + 1)]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise BenchError(f"the {what} floor failed to start: {child.communicate()[1].strip().splitlines()[-1:]}")
        begin = time.monotonic() + 0.1  # CLOCK_MONOTONIC is the machine's: every child reads the same
        for child in children:  # every one told before any is waited for
            assert child.stdin is not None
            child.stdin.write(f"{begin} {begin + seconds}\n")
            child.stdin.flush()
        ended = []
        for child in children:
            out, err = child.communicate(timeout=seconds + 60)
            if child.returncode != 0:
                raise BenchError(f"the {what} floor failed: {err.strip().splitlines()[-1:]}")
            moved, at, cpu_s = out.split()
            ended.append((int(moved), float(at), float(cpu_s)))
    except subprocess.TimeoutExpired:
        raise BenchError(f"the {what} floor did not finish") from None
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    moved = sum(n for n, _, _ in ended)
    if moved >= backlog:
        raise BenchError(f"the {what} floor ran out of jobs ({backlog:,}): give it a bigger backlog")
    return moved / (max(at for _, at, _ in ended) - begin), sum(cpu for _, _, cpu in ended) / moved * 1e6


def _ready() -> tuple[float, float]:
    """Say this loop is ready, and read when to begin and end (the machine's monotonic clock)."""
    print("ready", flush=True)
    begin, end = map(float, sys.stdin.readline().split())
    time.sleep(max(0.0, begin - time.monotonic()))
    return begin, end


def _store_loop(url: str, client: int) -> tuple[int, float, float]:
    """One loop of redrive's store alone: claim a batch, write its successes."""
    from concurrent.futures import ThreadPoolExecutor
    from datetime import timedelta

    from redrive.core.job import Job
    from redrive.core.transitions import Completion
    from redrive.store.url import open_store

    store = open_store(url)  # the default durability: SQLite commits with synchronous=FULL
    lease_ttl = timedelta(seconds=30)

    def claim() -> list[Job]:
        return store.jobs_claim(queues=["default"], limit=StoreLoop.BATCH, worker_id=f"floor-{client}",
                                lease_ttl=lease_ttl)

    def finish(jobs: list[Job]) -> int:
        # what a worker writes of a no-op: its success, how long it ran and waited (its rollups)
        return len(store.jobs_finish([Completion(job.lease, None, {"duration_ms": 0, "wait_ms": 0})
                                      for job in jobs]))

    moved = 0
    try:
        _, end = _ready()
        cpu = time.process_time()  # every thread's, the claims' own included
        if not url.startswith("postgresql"):  # SQLite: one connection, one writer at a time, nothing to overlap
            while time.monotonic() < end:
                moved += finish(claim())
            return moved, time.monotonic(), time.process_time() - cpu
        # As a worker does: the next claim goes on, on another of the pool's connections, while the
        # last batch is written. (The batch claimed when the time is up is left running, not counted.)
        with ThreadPoolExecutor(max_workers=1) as claims:
            ahead = claims.submit(claim)
            while time.monotonic() < end:
                jobs = ahead.result()
                ahead = claims.submit(claim)
                moved += finish(jobs)
            at, cpu = time.monotonic(), time.process_time() - cpu
            ahead.result()
        return moved, at, cpu
    finally:
        store.close()


def _noop(payload: object) -> None:
    pass


def _claim_loop(url: str, client: int) -> tuple[int, float, float]:
    """One Python worker at its barest: claim up to 100, call each job, archive them."""
    moved = 0
    with psycopg.connect(url, autocommit=True) as conn:
        _, end = _ready()
        cpu = time.process_time()
        while time.monotonic() < end:
            for _job_id, payload in conn.execute(_CLAIM, (client,)).fetchall():
                _noop(payload)
            moved += conn.execute(_ARCHIVE, (client,)).rowcount
        return moved, time.monotonic(), time.process_time() - cpu


if __name__ == "__main__":  # one of the processes of PsycopgLoop's or StoreLoop's floor (_together)
    kind, url, client = sys.argv[1:]
    loop = _claim_loop if kind == "psycopg" else _store_loop
    print(*loop(url, int(client)))
