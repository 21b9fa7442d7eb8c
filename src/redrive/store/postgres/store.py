"""PostgresStore: many workers on many machines, through psycopg 3 and a pool.

Every operation is one SQL statement on an autocommit connection, so it is
atomic and costs one round trip; a keyed or big enqueue is the exception
(docs/storage.md). Claims use FOR UPDATE SKIP LOCKED; enqueue and
requeue send a NOTIFY that idle workers LISTEN for (a hint: workers also poll).
"""

from __future__ import annotations

import json
import logging
import re
import select
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import chain, islice
from typing import Any
from urllib.parse import unquote
from uuid import UUID, uuid4

import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import AdaptersMap, Loader
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import ExecStatus, Format, TransactionStatus
from psycopg.rows import RowFactory, dict_row, tuple_row
from psycopg.types.datetime import TimestamptzLoader
from psycopg.types.json import Jsonb, set_json_loads
from psycopg_pool import ConnectionPool, PoolTimeout

from redrive.core import checks
from redrive.core.breaker import Breaker, from_json, to_json
from redrive.core.dead_letters import Revival, distinct_jobs
from redrive.core.job import (
    DEAD_LETTER_COLUMNS,
    JOB_COLUMNS,
    DeadLetter,
    DeadLetterFilter,
    EnqueueResult,
    Job,
    JobEvent,
    Lease,
    NewJob,
    StageDone,
    refuse_reuse,
)
from redrive.core.limits import Candidate, Limits, Permit, keys_of, pick, scan_size, usage_of
from redrive.core.outbox import OUTBOX_COLUMNS, OutboxChange, OutboxRow, OutboxStatus
from redrive.core.rollups import bucket_of, rollup_folds, rollup_range
from redrive.core.states import ACTIVE_ORDER, Status
from redrive.core.transitions import (
    KINDS,
    Cancellation,
    Completion,
    FailNow,
    Finish,
    Finished,
    Requeue,
    RetryLater,
    by_reclaim,
    set_aside,
    taken_back,
)
from redrive.errors import (
    ConfigError,
    DeadLetterNotFound,
    SchemaOutdated,
    StoreError,
    StoreFull,
    StoreTimeout,
    StoreUnavailable,
)
from redrive.store.port import WORKER_FORGOTTEN_AFTER_S, BreakerEvent, Control, WorkerReport, worker_detail
from redrive.store.postgres.deadlines import Deadlines, Overran
from redrive.store.reads import (
    COUNTED_UP_TO,
    EXACT_UP_TO,
    AuditEntry,
    DeadLetterFacets,
    JobFilter,
    Page,
    Pair,
    QueueStats,
    Rollup,
    RunEnded,
    ScheduleState,
    WorkerInfo,
    decode_cursor,
    encode_cursor,
    page_size,
    paged,
    rollups_of,
    shares,
    tables_of,
    tallied,
)
from redrive.store.sql import load_migrations, load_queries
from redrive.store.times import TimeMemo

log = logging.getLogger("redrive.store.postgres")
# The pool logs each failed reconnection, with libpq's multi-line message,
# about once a second during an outage; the store says it once instead.
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
_PROBE_TIMEOUT_S = 2
_QUICK_WAIT_S = 1.0  # a wait for a pooled connection past this asks whether the server is there
_PROBE_EVERY_S = 0.2  # while the server is down, how often a caller may ask whether it is back


_PACKAGE = "redrive.store.postgres"
_CONNECT_TIMEOUT_S = 5
DEFAULT_DEADLINE = timedelta(seconds=10)
# Jobs per enqueue statement. A bigger batch goes in several, pipelined in one
# transaction; for 1,000 jobs, parts of 64, 192, 256 and 500 were all slower.
_INSERT_CHUNK = 128


class PostgresStore:
    dialect = "postgres"

    def __init__(
        self, url: str, *, pool_size: int = 4, check_schema: bool = True,
        clock: Callable[[], datetime] | None = None, deadline: timedelta = DEFAULT_DEADLINE,
        pool_mode: str = "session", listen_url: str = "",
    ) -> None:
        """``check_schema=False`` is for ``redrive migrate``, which brings it up
        to date. ``clock`` stands in for the database's ``now()`` in every
        statement, so tests can move time instead of sleeping. ``deadline``:
        how long one call may take (``deadlines.py``); a worker shortens it to
        fit its lease TTL. ``pool_mode="transaction"``: ``url`` leads to a
        pooler that may give each transaction another server session
        (PgBouncer's transaction mode), so no statement is prepared (a
        prepared statement lives in one session) and LISTEN, which needs a
        session of its own, goes to ``listen_url`` or, without one, nowhere:
        workers then poll (docs/storage.md)."""
        self.url = url
        self._where = _describe(url)
        if deadline <= timedelta(0):
            raise ConfigError("a store's deadline must be longer than zero")
        if pool_mode not in ("session", "transaction"):
            raise ConfigError(f"pool_mode is session or transaction, not {pool_mode!r}")
        self.deadline = deadline
        self._deadlines = Deadlines()
        self._within = threading.local()  # a thread's shorter deadline (``calls_within``)
        self._link = _link_defaults(url, deadline)
        if pool_mode == "transaction":
            self._link["prepare_threshold"] = None
        self._listen_url = listen_url or (url if pool_mode == "session" else "")
        if listen_url:
            _describe(listen_url)  # a malformed one is refused now, not in the listening thread
        self._listen_link = _link_defaults(self._listen_url, deadline) if self._listen_url else {}
        self._clock = clock
        self._finish_lock = threading.Lock()
        self._finish_listeners: dict[str, list[Callable[[], None]]] = {}
        self._finish_thread: threading.Thread | None = None
        self._finish_ready = threading.Event()
        self._closing = threading.Event()
        self._queries = load_queries(_PACKAGE, dialect="postgres")
        if clock is not None:
            self._queries = {name: _on_clock(name, sql) for name, sql in self._queries.items()}
        self._migrations = load_migrations(_PACKAGE)
        if check_schema:
            self._check_schema()
        self._pool_size = pool_size
        self._pool = self._new_pool()
        self._down: float | None = None  # when the server stopped answering, while it does not
        self._probed = 0.0  # when _revive last asked the server (monotonic)
        self._revive_lock = threading.Lock()
        if check_schema:
            # The first connection is made in the background; a request made
            # before it is ready makes the pool open a second one, and a pool
            # hands its connections out in turn, so even one thread enqueueing
            # would alternate between two backends (+90 µs per call here).
            with self._errors():
                self._pool.wait(timeout=_CONNECT_TIMEOUT_S)

    # -- connections and errors ----------------------------------------------

    def _new_pool(self) -> ConnectionPool[Any]:
        return ConnectionPool(
            self.url,
            min_size=1,
            max_size=self._pool_size,
            kwargs={"autocommit": True, "row_factory": dict_row, "context": _ADAPTERS, **self._link},
            timeout=_CONNECT_TIMEOUT_S * 2,
            open=True,
            name="redrive",
            check=_check_if_stirred,
        )

    def _connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        if self._down is not None and not self._revive():
            # Fail at once while the server is down: waiting on the old pool
            # would hold the caller for the pool's timeout after it is back.
            raise psycopg.OperationalError("the server is not answering yet")
        try:
            conn = self._pool.getconn(timeout=_QUICK_WAIT_S)
        except PoolTimeout:
            # No connection within a second: the server is gone (fail now, as
            # while it is down) or every connection is busy (wait as usual).
            if not self._answers():
                self._down = self._down or time.monotonic()
                raise psycopg.OperationalError("the server is not answering") from None
            conn = self._pool.getconn()
        return _lent(self._pool, conn, self._deadlines, self._deadline().total_seconds())

    def _deadline(self) -> timedelta:
        shorter: timedelta | None = getattr(self._within, "limit", None)
        return self.deadline if shorter is None else min(shorter, self.deadline)

    @contextmanager
    def calls_within(self, limit: timedelta) -> Iterator[None]:
        """The calls this thread makes inside the block take ``limit`` at
        most (or the store's deadline, if shorter); other threads' calls keep
        theirs. A stopping worker's last call must fit its time to stop."""
        if limit <= timedelta(0):
            raise ConfigError("a call's deadline must be longer than zero")
        outer = getattr(self._within, "limit", None)
        self._within.limit = limit if outer is None else min(limit, outer)
        try:
            yield
        finally:
            self._within.limit = outer

    def _answers(self) -> bool:
        try:
            psycopg.connect(self.url, **{**self._link, "connect_timeout": _PROBE_TIMEOUT_S}).close()
        except psycopg.OperationalError:
            return False
        return True

    def _revive(self) -> bool:
        """After an outage (or a call that overran its deadline: the old
        pool's connections may all lead into a partition), a fresh pool as
        soon as the server answers. The pool's own reconnection backs off,
        doubling: after a minute's outage its next try could come half a
        minute after the server is back. One caller asks the server at a
        time, at most every ``_PROBE_EVERY_S``; the others fail at once
        rather than queue behind a probe that may take its whole timeout."""
        if not self._revive_lock.acquire(blocking=False):
            return False
        try:
            if self._down is None:
                return True
            if time.monotonic() - self._probed < _PROBE_EVERY_S:
                return False
            answers = self._answers()
            self._probed = time.monotonic()
            if not answers:
                return False
            old, self._pool = self._pool, self._new_pool()
            log.warning("PostgreSQL at %s answers again after %.1f s", self._where, time.monotonic() - self._down)
            self._down = None
        finally:
            self._revive_lock.release()
        old.close(timeout=0)
        return True

    def _connect(self, *, listening: bool = False) -> psycopg.Connection[dict[str, Any]]:
        """A connection of its own, outside the pool: to ``url``, or with
        ``listening`` to where LISTEN goes (a session that lasts)."""
        url, link = (self._listen_url, self._listen_link) if listening else (self.url, self._link)
        try:
            return psycopg.connect(url, autocommit=True, row_factory=dict_row, context=_ADAPTERS, **link)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {_describe(url)}: {_reason(exc)}"
            ) from exc

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except psycopg.errors.DiskFull as exc:  # an OperationalError, but the server is there
            raise StoreFull(f"the disk of PostgreSQL at {self._where} is full: nothing was written") from exc
        except Overran as exc:
            if self._down is None:
                self._down = time.monotonic()
            silent = f"PostgreSQL at {self._where} did not answer within {self._deadline().total_seconds():g} s"
            raise StoreTimeout(f"{silent} (its connection was dropped): what was asked may or may not have been done",
                               silent=silent) from exc
        except (psycopg.OperationalError, PoolTimeout) as exc:
            if self._down is None:
                self._down = time.monotonic()
            raise StoreUnavailable(
                f"lost PostgreSQL at {self._where}: {_reason(exc)}"
            ) from exc
        except psycopg.errors.UndefinedTable as exc:
            raise SchemaOutdated() from exc
        except (psycopg.errors.DuplicatePreparedStatement, psycopg.errors.InvalidSqlStatementName) as exc:
            # Statements prepared in one session and used in another: a pooler
            # in transaction mode hands each transaction any server session.
            raise StoreError(f"PostgreSQL refused the operation: {_reason(exc)}; if {self._where} is a "
                             "transaction-mode pooler (PgBouncer), set REDRIVE_DATABASE_POOL_MODE=transaction") from exc
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL refused the operation: {_reason(exc)}") from exc

    def _run(
        self, name: str, params: dict[str, Any] | None = None, *, conn: Any = None,
        rows: RowFactory[Any] = dict_row, binary: bool = False,
    ) -> list:
        """``binary``: results in PostgreSQL's binary format, for the claim: a
        time is then eight bytes to add to an epoch, not text to parse."""
        sql = self._queries[name]
        params = self._with_clock(params)
        with self._errors():
            if conn is not None:
                with conn.cursor(row_factory=rows, binary=binary) as cur:
                    return _rows(cur.execute(sql, params))
            with self._connection() as pooled, pooled.cursor(row_factory=rows, binary=binary) as cur:
                return _rows(cur.execute(sql, params))

    def _with_clock(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        return params if self._clock is None else {**(params or {}), "now": self._clock()}

    # -- schema --------------------------------------------------------------

    def _schema_version(self, conn: psycopg.Connection[dict[str, Any]]) -> int:
        if not self._run("migration_table_exists", conn=conn)[0]["present"]:
            return 0
        return int(self._run("migration_version", conn=conn)[0]["version"])

    def _check_schema(self) -> None:
        with self._connect() as conn, self._errors():
            version = self._schema_version(conn)
        latest = self._migrations[-1].version
        if version < latest:
            raise SchemaOutdated(
                f"the database at {self._where} has schema version {version}, this "
                f"redrive needs {latest}: run `redrive migrate`"
            )

    def schema_current(self) -> bool:
        with self._errors(), self._connection() as conn:
            return self._schema_version(conn) >= self._migrations[-1].version

    def migrate(self) -> list[int]:
        """Each migration in a transaction of its own that first takes a
        transaction-level lock and reads the version again: two ``migrate``
        at once apply each migration once, and no lock outlives its
        transaction (a session lock would stay on a pooler's server session,
        and its unlock could reach another)."""
        applied = []
        with self._connect() as conn, self._errors():
            for m in self._migrations:
                with conn.transaction():
                    conn.execute(self._queries["migration_lock"])
                    conn.execute(self._queries["migration_table_create"])
                    if self._schema_version(conn) >= m.version:
                        continue
                    conn.execute(m.sql)
                    conn.execute(self._queries["migration_record"], {"version": m.version, "name": m.name})
                applied.append(m.version)
        return applied

    # -- jobs ----------------------------------------------------------------

    def now(self) -> datetime:
        return self._run("now")[0]["now"]

    def jobs_insert(self, *, jobs: Iterable[NewJob], conn: Any = None) -> list[EnqueueResult]:
        if conn is not None and not isinstance(conn, psycopg.Connection):
            raise ConfigError("PostgresStore joins only a psycopg (3) Connection's transaction")
        pending = iter(jobs)
        head = list(islice(pending, _INSERT_CHUNK + 1))
        if not head:
            return []
        if conn is not None:
            with self._errors(), _savepoint(conn):
                # text: the caller's connection may bind on the client (Django's
                # does), and such cursors cannot read binary
                return self._answer(*self._insert_pipelined(chain(head, pending), conn, binary=False), conn)
        if len(head) == 1 and not head[0].key:
            return [self._insert_one(head[0])]
        if len(head) <= _INSERT_CHUNK and not any(j.key for j in head) and _one_statement(head):
            # one statement in autocommit: already atomic, one round trip
            docs = [_new_job_json(j) for j in head]
            return self._answer(head, docs, *_created(self._run(
                "jobs_insert_plain", _plain_params(docs, head[0]), rows=tuple_row, binary=True)))
        with self._errors(), self._connection() as pooled, pooled.transaction():
            # a refusal found after the insert statements must undo them
            return self._answer(*self._insert_pipelined(chain(head, pending), pooled, binary=True), pooled)

    def _insert_one(self, job: NewJob) -> EnqueueResult:
        """One job without a key, in autocommit: one round trip, typed
        parameters, the answer in binary (times eight bytes each, not text)."""
        [(status, run_at, at, _)] = self._run("job_insert", {
            "id": job.id, "task": job.task, "queue": job.queue, "args": Jsonb(job.args) if job.args else None,
            "kwargs": Jsonb(job.kwargs) if job.kwargs else None, "priority": job.priority,
            "max_attempts": job.max_attempts, "owner": job.owner, "run_at": job.run_at, "stage": job.stage,
            "delay_s": job.delay.total_seconds() if job.delay else 0.0,
            "dependencies": Jsonb(list(job.dependencies)) if job.dependencies else None,
            "meta": Jsonb(job.created_meta) if job.trace else None,
        }, rows=tuple_row, binary=True)
        return EnqueueResult.created(job, status=Status(status), run_at=run_at, at=at)

    def _answer(
        self, jobs: list[NewJob], docs: list[dict[str, Any]], created: dict[str, Created], at: datetime,
        conn: psycopg.Connection | None = None,
    ) -> list[EnqueueResult]:
        """Each job as created, or the run its taken key points at."""
        found = _found(jobs, docs, created, at)
        names = _taken_keys(jobs, found)
        twins = self._run("job_keys_get", {"keys": Jsonb(names)}, conn=conn) if names else []
        return _results(jobs, found, twins)

    def _insert_parts(
        self, pending: Iterator[NewJob], jobs: list[NewJob], docs: list[dict[str, Any]],
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Each insert statement and its parameters, built as they are asked
        for (adding to ``jobs`` and ``docs``): plain jobs in chunks, a
        statement for each trace context and set of dependencies in the chunk
        (a batch of one task has one; tasks taking turns do not make a
        statement a job), then the keyed ones in one statement that takes
        their keys in sorted order, so two batches cannot deadlock."""
        keyed: list[dict[str, Any]] = []
        while chunk := list(islice(pending, _INSERT_CHUNK)):
            jobs += chunk
            # the first job of each group (which the statement's shared values
            # come from), and the group's jobs
            groups: dict[tuple[int, tuple[str, ...]], tuple[NewJob, list[dict[str, Any]]]] = {}
            for job in chunk:
                doc = _new_job_json(job)
                docs.append(doc)
                if job.key:
                    if job.trace:
                        doc["trace"] = dict(job.trace)
                    if job.dependencies:
                        doc["dependencies"] = job.dependencies  # a tuple: json writes it as an array
                    keyed.append(doc)
                    continue
                group = groups.get(name := _shared(job))
                if group is None:
                    group = groups[name] = (job, [])
                group[1].append(doc)
            for lead, plain in groups.values():
                yield "jobs_insert_plain", self._plain(plain, lead)
        if keyed:
            yield "jobs_insert", self._with_clock({"jobs": Jsonb(keyed)}) or {}

    def _plain(self, docs: list[dict[str, Any]], lead: NewJob) -> dict[str, Any]:
        return self._with_clock(_plain_params(docs, lead)) or {}

    def _insert_pipelined(
        self, pending: Iterator[NewJob], conn: psycopg.Connection, *, binary: bool,
    ) -> tuple[list[NewJob], list[dict[str, Any]], dict[str, Created], datetime]:
        """Sends each chunk as soon as it is built, so the server inserts one
        while the caller checks and encodes the next (about a third faster for
        1,000 jobs than one statement). ``binary``: the answer's times as
        eight bytes each, not text to parse (a quarter faster for 1,000 jobs)."""
        jobs: list[NewJob] = []
        docs: list[dict[str, Any]] = []
        with conn.pipeline():
            sent = [conn.cursor(row_factory=tuple_row, binary=binary).execute(self._queries[name], params)
                    for name, params in self._insert_parts(pending, jobs, docs)]
        created: dict[str, Created] = {}
        for cur in sent:
            answered, at = _created(cur.fetchall())  # one transaction: one clock for all
            created.update(answered)
        return jobs, docs, created, at

    async def jobs_insert_async(self, *, jobs: Iterable[NewJob], conn: Any) -> list[EnqueueResult]:
        """``jobs_insert`` in the transaction of the caller's psycopg
        ``AsyncConnection`` (a SQLAlchemy ``AsyncSession``'s), without blocking
        its event loop: the job exists if and only if that transaction commits."""
        if not isinstance(conn, psycopg.AsyncConnection):
            raise ConfigError("PostgresStore joins only a psycopg (3) AsyncConnection's transaction asynchronously")
        created: list[NewJob] = []
        docs: list[dict[str, Any]] = []
        with self._errors():
            if not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
                await conn.execute("SELECT 1")  # begins the caller's transaction, as in _savepoint
            async with conn.transaction():
                made: dict[str, Created] = {}
                for name, params in self._insert_parts(iter(jobs), created, docs):
                    cur = await conn.cursor(row_factory=tuple_row).execute(self._queries[name], params)
                    answered, at = _created(await cur.fetchall())
                    made.update(answered)
                found = _found(created, docs, made, at)
                names = _taken_keys(created, found)
                twins: list[dict[str, Any]] = []
                if names:
                    read = await conn.cursor(row_factory=dict_row).execute(
                        self._queries["job_keys_get"], self._with_clock({"keys": Jsonb(names)}))
                    twins = await read.fetchall()
        return _results(created, found, twins)

    def jobs_claim(
        self, *, queues: Sequence[str], limit: int, worker_id: str, lease_ttl: timedelta,
        blocked: Sequence[str] = (), limits: Limits | None = None,
    ) -> list[Job]:
        params = {"queues": list(queues), "limit": limit, "worker_id": worker_id, "lease_ttl": lease_ttl,
                  "blocked": list(blocked) or None}
        if limits:
            return self._claim_within(params, limits)
        # positional: no dict per row, no 32 keywords per job; binary: six times a job, each cheap to read
        rows = self._run("jobs_claim", params, rows=tuple_row, binary=True)
        return self._runnable(rows)

    def _runnable(self, rows: Sequence[tuple]) -> list[Job]:
        """The claimed jobs that can run; the others fail alone (``set_aside``)."""
        jobs = [_claimed(row) for row in rows]
        # jsonb cannot hold NUL or a lone surrogate: only the time can be wrong
        aside = [set_aside(job.lease, problem) for job in jobs
                 if (problem := checks.stored_problem(job.run_at, "", None))]
        if not aside:
            return jobs
        self.jobs_finish(aside)
        failed = {item.lease for item in aside}
        return [job for job in jobs if job.lease not in failed]

    def _claim_within(self, params: dict[str, Any], limits: Limits) -> list[Job]:
        """A claim with limits: under the limits' lock, the due jobs that fit,
        claimed with their permits, in one transaction."""
        with self._errors(), self._connection() as conn, conn.transaction():
            self._run("limits_lock", conn=conn)
            found = self._run("jobs_due_limited", {**params, "limit": scan_size(params["limit"])},
                              conn=conn)
            candidates = [Candidate(r["id"], r["queue"], r["owner"], r["dependencies"]) for r in found]
            if not candidates:
                return []
            keys = {c.id: [key for key, _ in keys_of(c, limits)] for c in candidates}
            read = sorted({k for ks in keys.values() for k in ks})
            self._run("permits_forget", {"keys": read, "keep": limits.longest}, conn=conn)
            permits = self._run("permits_read", {"keys": read}, conn=conn)
            usage = usage_of((Permit(p["key"], p["age_s"], p["running"]) for p in permits), limits)
            chosen = pick(candidates, usage, limits, params["limit"])
            if not chosen:
                return []
            rows = self._run("jobs_claim_chosen", {
                **params, "ids": [c.id for c in chosen],
                "keys": Jsonb([{"id": c.id, "key": key} for c in chosen for key in keys[c.id]]),
            }, conn=conn, rows=tuple_row, binary=True)
        return self._runnable(rows)

    def leases_extend(self, *, leases: Sequence[Lease], lease_ttl: timedelta) -> set[Lease]:
        if not leases:
            return set()
        return _applied(self._run("leases_extend", {**_leases(leases), "lease_ttl": lease_ttl}))

    def lease_check(self, *, lease: Lease, conn: Any = None) -> bool:
        params = {"id": lease.job_id, "token": lease.token}
        if isinstance(conn, psycopg.Connection) and self._run("schema_present", conn=conn)[0]["present"]:
            # FOR SHARE: the job cannot change hands until the caller's transaction ends
            return bool(self._run("lease_lock", params, conn=conn))
        return bool(self._run("lease_lock", params))

    def jobs_finish(self, items: Sequence[Finish]) -> list[Finished]:
        if not items:
            return []
        firsts: dict[Lease, Finish] = {}
        for item in items:
            firsts.setdefault(item.lease, item)  # a job is ended once: the first of its lease wins
        once = list(firsts.values())
        statement = "jobs_complete" if all(type(item) is Completion for item in once) else "jobs_finish"
        rows = self._run(statement, {"items": Jsonb([_finish_json(n, item) for n, item in enumerate(once)])},
                         rows=tuple_row)
        # rows come in the order of the items, each with its item's place
        return [Finished(once[n], task, queue, _STATUS[status], attempt, stage, dead_letter_id, escalated, by)
                for n, task, queue, status, attempt, stage, dead_letter_id, escalated, by, _ in rows]

    def control_read(self, *, job_ids: Sequence[UUID]) -> Control:
        rows = self._run("control_read", {"ids": list(job_ids)})
        return Control(paused={r["name"]: r["by"] for r in rows if r["kind"] == "pause"},
                       cancels={UUID(r["name"]): r["by"] for r in rows if r["kind"] == "cancel"})

    def queue_pause(self, *, queue: str, by: str) -> bool:
        return bool(self._run("queue_pause", {"queue": queue, "by": by}))

    def worker_report(self, *, report: WorkerReport) -> None:
        self._run("worker_report", {
            **{name: getattr(report, name) for name in ("id", "host", "pid", "concurrency", "version", "running")},
            "queues": Jsonb(list(report.queues)), "detail": Jsonb(worker_detail(report)),
            "forget_after_s": WORKER_FORGOTTEN_AFTER_S})

    def worker_remove(self, *, worker_id: str) -> None:
        self._run("worker_remove", {"id": worker_id})

    def queue_resume(self, *, queue: str) -> bool:
        return bool(self._run("queue_resume", {"queue": queue}))

    def stages_save(self, *, items: Sequence[StageDone]) -> set[Lease]:
        return self._fenced("stages_save", [
            {**_lease_json(i.lease), "stage": i.stage, "output": i.output,
             "stage_attempts": dict(i.stage_attempts), "next_stage": i.next_stage}
            for i in items
        ])

    def _fenced(self, name: str, items: list[dict]) -> set[Lease]:
        if not items:
            return set()
        return _applied(self._run(name, {"items": Jsonb(items)}))

    def jobs_reclaim(self, *, limit: int = 500, worker_id: str | None = None,
                     bystanders: bool = False) -> list[Finished]:
        rows = (self._run("jobs_held", {"worker_id": worker_id, "limit": limit}) if worker_id is not None
                else self._run("jobs_expired", {"limit": limit}))
        return self.jobs_finish([
            taken_back(Lease(row["id"], row["lease_token"]), row["lease_owner"],
                       last=row["attempts"] >= row["max_attempts"], crashed=worker_id is not None, bystander=bystanders)
            for row in rows
        ])

    def jobs_delete(self, *, job_ids: Sequence[UUID]) -> list[UUID]:
        if not job_ids:
            return []
        return [row["id"] for row in self._run("jobs_delete", {"ids": list(job_ids)})]

    def jobs_prune(self, *, older_than: timedelta, limit: int = 10_000) -> int:
        return self._run("jobs_prune", {"older_than": older_than, "limit": limit})[0]["pruned"]

    def jobs_cancel(self, *, job_ids: Sequence[UUID], by: str) -> list[Job | None]:
        if not job_ids:
            return []
        found = {row["id"]: _job(row) for row in self._run("jobs_cancel", {"ids": list(job_ids), "by": by})}
        return [found.get(job_id) for job_id in job_ids]

    def jobs_revive(self, *, revivals: Sequence[Revival]) -> list[Job | None]:
        if not distinct_jobs(revivals):
            return []
        rows = self._run("jobs_revive", {"revivals": Jsonb([{
            "id": str(r.job_id), "failed_at": None if r.plan.failed_at is None else r.plan.failed_at.isoformat(),
            "dead_letter_id": r.dead_letter_id, "by": r.plan.by, "replay_from": r.plan.replay_from,
            "stage": r.plan.stage, "stage_attempts": r.plan.stage_attempts,
            "keep_checkpoint": r.plan.keep_checkpoint, "manual_retries": r.plan.manual_retries,
            "meta": r.plan.meta([]),
        } for r in revivals])})
        revived = {row["id"]: _job(row) for row in rows}
        return [revived.get(r.job_id) for r in revivals]

    def dead_letter_get(self, *, id: int) -> DeadLetter | None:
        rows = self._run("dead_letter_get", {"id": id})
        return _dead_letter(rows[0]) if rows else None

    def dead_letters_page(
        self, *, where: DeadLetterFilter, after: str | None = None, limit: int = 50,
    ) -> Page[DeadLetter]:
        size, key = page_size(limit), decode_cursor(after, 1)
        rows = self._run("dead_letters_page", {**_letter_filter(where), "limit": size + 1,
                                               "after_id": None if key is None else key[0]})
        page = paged(rows, size, lambda row: encode_cursor(row["id"]))
        return Page([_dead_letter(row) for row in page.items], page.next_cursor)

    def dead_letter_facets(self, *, where: DeadLetterFilter) -> DeadLetterFacets:
        if (counted := tallied(where)) is not None:
            return DeadLetterFacets.of(self._run("dead_letters_tally", counted))
        return DeadLetterFacets.of(self._run("dead_letter_facets", _letter_filter(where)))

    def dead_letters_resolve(self, *, ids: Sequence[int], by: str | None, note: str | None = None) -> list[DeadLetter]:
        rows = self._run("dead_letters_resolve", {"ids": list(ids), "by": by, "note": note})
        return sorted((_dead_letter(row) for row in rows), key=lambda d: d.id)

    def dead_letter_note(self, *, id: int, text: str, by: str | None) -> DeadLetter:
        rows = self._run("dead_letter_note", {"id": id, "text": text, "by": by})
        if not rows:
            raise DeadLetterNotFound(f"no dead letter has id {id}")
        return _dead_letter(rows[0])

    def breaker_update(
        self, *, name: str, change: Callable[[Breaker, float], Breaker], by: str | None = None
    ) -> Breaker:
        with self._errors(), self._connection() as conn, conn.transaction():
            row = self._run("breaker_lock", {"name": name, "initial": Jsonb(to_json(Breaker()))}, conn=conn)[0]
            before = from_json(row["data"])
            after = change(before, row["now"])
            self._run("breaker_save", {"name": name, "state": after.state.value,
                                       "data": Jsonb(to_json(after))}, conn=conn)
            for from_state, to_state, reason in after.changes[len(before.changes):]:
                self._run("breaker_event_insert", {"name": name, "from_state": from_state.value,
                                                   "to_state": to_state.value, "reason": reason,
                                                   "by": by}, conn=conn)
        return after

    def breakers_list(self) -> tuple[dict[str, Breaker], float]:
        rows = self._run("breakers_list")
        now = rows[0]["now"] if rows else self.now().timestamp()
        return {row["name"]: from_json(row["data"]) for row in rows}, now

    def breaker_events_list(self, *, name: str) -> list[BreakerEvent]:
        return [BreakerEvent(**row) for row in self._run("breaker_events_list", {"name": name})]

    def outbox_open(self, *, lease: Lease, key: str, token: str) -> OutboxRow | None:
        rows = self._run("outbox_open", {**_lease_json(lease), "key": key, "outbox_token": token})
        return _outbox_row(rows[0]) if rows else None

    def outbox_update(self, *, lease: Lease, key: str, change: OutboxChange) -> OutboxRow | None:
        rows = self._run("outbox_update", {**_lease_json(lease), "key": key, **_outbox_change(change)})
        return _outbox_row(rows[0]) if rows else None

    def outbox_page(
        self, *, status: OutboxStatus | None = None, job_id: UUID | None = None, after: str | None = None,
        limit: int = 50,
    ) -> Page[OutboxRow]:
        size, key = page_size(limit), decode_cursor(after, 2)
        rows = self._run("outbox_page", {
            "status": status, "job_id": job_id, "limit": size + 1,
            "after_at": None if key is None else key[0], "after_key": None if key is None else key[1]})
        page = paged(rows, size, lambda row: encode_cursor(row["created_at"].isoformat(), row["key"]))
        return Page([_outbox_row(row) for row in page.items], page.next_cursor)

    def schedule_pause(self, *, name: str, by: str, now: datetime) -> bool:
        return bool(self._run("schedule_pause", {"name": name, "by": by, "now": now}))

    def schedule_resume(self, *, name: str) -> bool:
        return bool(self._run("schedule_resume", {"name": name}))

    def schedule_checkpoint(self, *, name: str, now: datetime) -> datetime:
        for _ in range(2):  # a row another scheduler created this instant is visible on the second try
            rows = self._run("schedule_checkpoint", {"name": name, "now": now})
            if rows:
                return rows[0]["fired_until"]
        raise StoreError(f"schedule {name!r} has no checkpoint row")

    def schedule_advance(self, *, name: str, to: datetime) -> None:
        self._run("schedule_advance", {"name": name, "to": to})

    def job_get(self, *, job_id: UUID) -> Job | None:
        rows = self._run("job_get", {"id": job_id})
        return _job(rows[0]) if rows else None

    def jobs_page(self, *, where: JobFilter, after: str | None = None, limit: int = 50) -> Page[Job]:
        size, key = page_size(limit), decode_cursor(after, 2)
        rows = self._run("jobs_page", {
            "statuses": None if where.statuses is None else [str(s) for s in where.statuses],
            "queue": where.queue, "task": where.task, "owner": where.owner, "error_code": where.error_code,
            "idempotency_key": where.idempotency_key, "created_after": where.created_after,
            "created_before": where.created_before,
            "after_at": None if key is None else key[0], "after_id": None if key is None else key[1],
            "limit": size + 1, **tables_of(where.statuses),
        })
        page = paged(rows, size, lambda row: encode_cursor(row["created_at"].isoformat(), str(row["id"])))
        return Page([_job(row) for row in page.items], page.next_cursor)

    def queues_stats(self, *, exact_up_to: int | None = None) -> list[QueueStats]:
        cap = max(EXACT_UP_TO, exact_up_to or 0)
        stats: dict[str, QueueStats] = {}
        waiting = [row["queue"] for row in self._run("queues_waiting")]
        rows = self._run("queues_stats", {"cap": cap, "queues": waiting})
        counts = {(row["queue"], row["status"]): row["n"] for row in rows}
        capped = [pair for pair, n in counts.items() if n >= cap and pair[1] != "running"]
        if capped:
            counts.update(self._estimated(counts, capped, cap))
        for row in rows:
            queue = stats.setdefault(row["queue"], QueueStats(row["queue"], dict.fromkeys(ACTIVE_ORDER, 0)))
            if (row["queue"], row["status"]) in capped:
                stats[row["queue"]] = queue = replace(queue, estimated=True)
            queue.counts[Status(row["status"])] = counts[row["queue"], row["status"]]
            age = row["oldest_due_age_s"]
            if age is not None and (queue.oldest_due_age_s is None or age > queue.oldest_due_age_s):
                stats[row["queue"]] = queue = replace(queue, oldest_due_age_s=age)
            if row["oldest_running_age_s"] is not None:
                stats[row["queue"]] = replace(queue, oldest_running_age_s=row["oldest_running_age_s"])
        return list(stats.values())

    def _estimated(self, counts: dict[Pair, int], capped: list[Pair], cap: int) -> dict[Pair, int]:
        """The waiting counts past ``cap``: the table's live rows (as
        PostgreSQL counts them at each commit) less every count known
        exactly, shared out among the capped (queue, state) pairs as the
        planner reckons they share; a pair whose share is small is counted
        exactly up to ``COUNTED_UP_TO`` instead. Never below the count
        known exactly."""
        (found,) = self._run("queues_estimate")
        weights = self._weights(found, capped) if len(capped) > 1 else {capped[0]: 1.0}
        floors = dict.fromkeys(capped, cap)
        exact = {pair: n for pair, n in counts.items() if pair not in floors}
        unsure = set(capped)
        while True:
            left = max(0, (found["live"] or 0) - sum(exact.values()))
            share = shares(left, {pair: weights[pair] for pair in unsure})
            small = sorted(p for p in unsure if share[p] < COUNTED_UP_TO and floors[p] < COUNTED_UP_TO)
            if not small:
                return {**exact, **{pair: max(floors[pair], share[pair]) for pair in unsure}}
            for row in self._run("queues_count", {"cap": COUNTED_UP_TO, "queues": [p[0] for p in small],
                                                  "statuses": [p[1] for p in small]}):
                pair = (row["queue"], row["status"])
                floors[pair] = row["n"]
                if row["n"] < COUNTED_UP_TO:  # counted to the end: exact after all
                    unsure.discard(pair)
                    exact[pair] = row["n"]

    def _weights(self, found: Any, pairs: list[Pair]) -> dict[Pair, float]:
        """How the planner reckons ``pairs`` share the waiting jobs: from the
        joint statistics in one statement, else (a pair too rare to be in
        them) from its plan; equal shares when the table was never analyzed."""
        if found["pairs"] is None:
            return dict.fromkeys(pairs, 1.0)
        common = dict(zip(map(tuple, found["pairs"]), found["freqs"] or (), strict=True))
        out = {}
        for pair in pairs:
            if pair in common:
                out[pair] = float(common[pair])
            else:
                (plan,) = self._run("queue_estimate", {"queue": pair[0], "status": pair[1]})[0].values()
                out[pair] = float(plan[0]["Plan"]["Plan Rows"]) / max(1.0, found["rows"] or 1.0)
        return out

    def runs_ended(self, *, since: datetime, limit: int = 10_000) -> list[RunEnded]:
        return [RunEnded(row["at"], row["task"], row["failed"], row["duration_s"])
                for row in self._run("runs_ended", {"since": since, "limit": limit})]

    def alerts_firing(self) -> dict[str, str]:
        return {row["rule"]: row["incident"] for row in self._run("alerts_firing")}

    def alert_fire(self, *, rule: str, incident: str, detail: str) -> bool:
        return bool(self._run("alert_fire", {"rule": rule, "incident": incident, "detail": detail}))

    def alert_resolve(self, *, rule: str, incident: str) -> bool:
        return bool(self._run("alert_resolve", {"rule": rule, "incident": incident}))

    def rollups_read(self, *, since: datetime, slot: timedelta = timedelta(minutes=1), by: str = "queue",
                     timed: bool = True) -> list[Rollup]:
        return rollups_of(self._run("rollups_read", rollup_range(since, slot, by, timed), rows=tuple_row))

    def rollups_compact(self) -> int:
        now = self.now()
        return sum(self._rollups_change(name, before, grain_s)
                   for name, before, grain_s in rollup_folds(now))

    def _rollups_change(self, name: str, before: int, grain_s: int) -> int:
        with self._errors(), self._connection() as conn, conn.cursor() as cur:
            cur.execute(self._queries[name], self._with_clock({"before": before, "grain_s": grain_s}))
            return cur.rowcount

    def audit_record(self, *, by: str, action: str, job_id: UUID | None = None,
                     detail: dict[str, Any] | None = None) -> AuditEntry:
        rows = self._run("audit_record", {"by": by, "action": action, "job_id": job_id,
                                          "detail": Jsonb(detail or {})})
        return AuditEntry(**rows[0])

    def session_open(self, *, id: str, principal: str, ttl: timedelta) -> None:
        self._run("session_open", {"id": id, "principal": principal, "ttl": ttl})

    def session_read(self, *, id: str) -> str | None:
        rows = self._run("session_read", {"id": id})
        return rows[0]["principal"] if rows else None

    def session_close(self, *, id: str) -> None:
        self._run("session_close", {"id": id})

    def audits_list(self, *, job_id: UUID | None) -> list[AuditEntry]:
        if job_id is None:
            return [AuditEntry(**row) for row in self._run("audits_general")]
        return [AuditEntry(**row) for row in self._run("audits_list", {"job_id": job_id})]

    def schedules_list(self) -> list[ScheduleState]:
        return [ScheduleState(**row) for row in self._run("schedules_list")]

    def workers_list(self) -> list[WorkerInfo]:
        return [WorkerInfo.of(row) for row in self._run("workers_list")]

    def job_events_list(self, *, job_id: UUID) -> list[JobEvent]:
        return [
            JobEvent(
                id=row["id"], job_id=row["job_id"], at=row["at"],
                from_status=Status(row["from_status"]) if row["from_status"] else None,
                to_status=Status(row["to_status"]), attempt=row["attempt"], meta=row["meta"],
            )
            for row in self._run("job_events_list", {"id": job_id})
        ]

    # -- wake-ups ------------------------------------------------------------

    def wakeups_subscribe(self, on_wake: Callable[[str], None]) -> Callable[[], None]:
        if not self._listen_url:
            log.info("PostgreSQL at %s is behind a transaction-mode pooler and no REDRIVE_LISTEN_URL is set: "
                     "workers find new jobs by polling", self._where)
            return lambda: None
        stop = threading.Event()

        def listen() -> None:
            lost = False
            while not stop.is_set():
                try:
                    with self._connect(listening=True) as conn:
                        conn.execute(self._queries["wakeups_listen"])
                        lost = False
                        while not stop.is_set():
                            for note in conn.notifies(timeout=0.5):
                                on_wake(note.payload)
                except (StoreError, psycopg.Error) as exc:
                    # Polling still finds the jobs; try to listen again shortly (said once per outage).
                    if not lost:
                        log.warning("LISTEN connection lost (%s); workers poll meanwhile", _reason(exc))
                    lost = True
                    stop.wait(1.0)

        thread = threading.Thread(target=listen, name="redrive-listen", daemon=True)
        thread.start()

        def unsubscribe() -> None:
            stop.set()
            thread.join(timeout=2)

        return unsubscribe

    def finishes_subscribe(self, *, job_id: UUID, on_finish: Callable[[], None]) -> Callable[[], None]:
        # One listening connection per store serves every waiter; a waiter's
        # row makes the job's ending send a NOTIFY (migration 0014).
        if not self._listen_url:
            return lambda: None  # nowhere to LISTEN: the waiter's re-reads find the ending
        with self._finish_lock:
            self._finish_listeners.setdefault(str(job_id), []).append(on_finish)
            if self._finish_thread is None:
                self._finish_thread = threading.Thread(target=self._listen_finishes, name="redrive-listen-done",
                                                       daemon=True)
                self._finish_thread.start()
        self._finish_ready.wait(_CONNECT_TIMEOUT_S)  # listening before the caller reads the job
        waiter = uuid4()
        self._run("result_waiter_add", {"job_id": job_id, "waiter": waiter})

        def stop() -> None:
            with self._finish_lock:
                self._finish_listeners[str(job_id)].remove(on_finish)
            try:
                self._run("result_waiter_remove", {"job_id": job_id, "waiter": waiter})
            except StoreError as exc:  # a stale row only costs a NOTIFY nobody hears
                log.warning("could not remove a result waiter: %s", exc)

        return stop

    def _listen_finishes(self) -> None:
        lost = False
        while not self._closing.is_set():
            try:
                with self._connect(listening=True) as conn:
                    conn.execute(self._queries["finishes_listen"])
                    lost = False
                    self._finish_ready.set()
                    while not self._closing.is_set():
                        for note in conn.notifies(timeout=0.5):
                            with self._finish_lock:
                                told = list(self._finish_listeners.get(note.payload, ()))
                            for on_finish in told:
                                on_finish()
            except (StoreError, psycopg.Error) as exc:
                if not lost:
                    log.warning("LISTEN for results lost (%s); waiters re-read their jobs meanwhile", _reason(exc))
                lost = True
                self._closing.wait(1.0)

    def close(self) -> None:
        self._closing.set()
        # Its threads may be connecting into a partition: do not wait them out.
        self._pool.close(timeout=0)


def _on_clock(name: str, sql: str) -> str:
    """A query that reads the given clock instead of the database's."""
    if name.startswith("migration") or name == "wakeups_listen":
        return sql  # run outside _run, on the database's own clock
    return re.sub(r"\b(?:clock_timestamp|now)\(\)", "%(now)s::timestamptz", sql)


def _savepoint(conn: psycopg.Connection[Any]) -> AbstractContextManager[Any]:
    """A savepoint in the caller's transaction. On an idle connection outside
    autocommit, psycopg's ``transaction()`` would begin a transaction of its own
    and commit it at the end of the block; a first statement starts the
    caller's transaction instead, as any statement of theirs would."""
    if not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        conn.execute("SELECT 1")
    return conn.transaction()


def _rows(cur: psycopg.Cursor[Any]) -> list:
    """What a statement answered: its rows, or none. (Asking ``description``
    builds a column object for each column on every call.)"""
    result = cur.pgresult
    return cur.fetchall() if result is not None and result.status == ExecStatus.TUPLES_OK else []


def _shared(job: NewJob) -> tuple[int, tuple[str, ...]]:
    """What ``jobs_insert_plain`` takes once for all its jobs: their trace
    context (one enqueue's jobs share one object, so its identity tells them
    apart) and their dependencies (one task's jobs share its tuple)."""
    return id(job.trace), job.dependencies


def _one_statement(jobs: list[NewJob]) -> bool:
    lead = _shared(jobs[0])
    return all(_shared(job) == lead for job in jobs)


def _plain_params(docs: list[dict[str, Any]], lead: NewJob) -> dict[str, Any]:
    """``jobs_insert_plain``'s parameters: jobs that share ``lead``'s trace
    context and dependencies, which go once for all of them."""
    return {"jobs": Jsonb(docs), "meta": Jsonb(lead.created_meta),
            "dependencies": Jsonb(list(lead.dependencies)) if lead.dependencies else None}


# A job as an insert statement wrote it: its status, due time and creation time.
Created = tuple[Status, datetime, datetime]


def _created(rows: list[tuple]) -> tuple[dict[str, Created], datetime]:
    """One insert statement's answer (``jobs_insert``): the jobs it names, by
    the ids the client sent, and its clock (the row without an id)."""
    at = next(time for id, _, time in rows if id is None)
    return {id: (_STATUS[status], run_at or at, at) for id, status, run_at in rows if id is not None}, at


def _found(jobs: list[NewJob], docs: list[dict[str, Any]], created: dict[str, Created],
           at: datetime) -> list[Created | None]:
    """For each job, in order, how it was created, or None where its key was
    taken. A job without a key the answer leaves out was inserted due at the
    statement's clock, queued (``jobs_insert_plain``)."""
    due_now = (Status.QUEUED, at, at)  # one for all of them: a tuple holds no state
    return [created.get(doc["id"]) or (None if job.key else due_now) for job, doc in zip(jobs, docs, strict=True)]


def _taken_keys(jobs: list[NewJob], found: list[Created | None]) -> list[dict[str, str]]:
    """The keys already taken, to read the runs they point at."""
    return [{"task": j.task, "owner": j.owner or "", "key": j.key.key}
            for j, row in zip(jobs, found, strict=True) if row is None and j.key]


def _results(jobs: list[NewJob], found: list[Created | None], twins: list[dict[str, Any]]) -> list[EnqueueResult]:
    by_key = {(row["key_task"], row["key_owner"], row["key_name"]): row for row in twins}
    results = []
    for new, row in zip(jobs, found, strict=True):
        if row is not None:
            status, run_at, at = row
            results.append(EnqueueResult.created(new, status=status, run_at=run_at, at=at))
            continue
        assert new.key is not None, "only keyed jobs can be left out"
        twin = by_key[(new.task, new.owner or "", new.key.key)]
        refuse_reuse(new.key, twin["key_version"], twin["key_fingerprint"])
        results.append(EnqueueResult(_job(twin), duplicate=True))
    return results


@contextmanager
def _lent(pool: ConnectionPool[Any], conn: psycopg.Connection[Any], deadlines: Deadlines,
          seconds: float) -> Iterator[psycopg.Connection[Any]]:
    try:
        with deadlines.watch(conn, seconds):
            yield conn
    finally:
        pool.putconn(conn)


def _link_defaults(url: str, deadline: timedelta) -> dict[str, Any]:
    """libpq settings for every connection, where the URL gives none: a
    bounded connect, and TCP keepalives and ``tcp_user_timeout`` so that a
    connection whose peer is gone (a partition, a crashed host) fails at
    the socket instead of after the kernel's retransmissions (~15 min) or an
    idle connection's keepalive default (2 h). Unix sockets ignore them."""
    given = conninfo_to_dict(url)
    wanted: dict[str, Any] = {
        "connect_timeout": _CONNECT_TIMEOUT_S, "keepalives": 1, "keepalives_idle": 10,
        "keepalives_interval": 5, "keepalives_count": 3,
        "tcp_user_timeout": int(deadline.total_seconds() * 1000),
    }
    return {key: value for key, value in wanted.items() if key not in given}


class _LenientTimestamptz(TimestamptzLoader):
    """A time PostgreSQL keeps but Python cannot (before year 1 or after 9999
    in UTC) reads as the nearest one Python can, so one such row cannot make
    a list or a claim batch fail; the claim then sets its job aside."""

    def load(self, data: Buffer) -> datetime:
        try:
            return super().load(data)
        except psycopg.DataError:
            text = bytes(data)
            return checks.TIME_FLOOR if b"BC" in text or text.startswith(b"0001-") else checks.TIME_CEILING


class _LenientTimestamptzBinary(Loader):
    """The same leniency for a time read in binary (microseconds since
    2000-01-01 UTC; infinity is the largest or smallest of them)."""

    format = Format.BINARY

    def load(self, data: Buffer) -> datetime:
        return _binary_times(bytes(data))


def _from_binary(data: bytes) -> datetime:
    micros = int.from_bytes(data, "big", signed=True)
    try:
        return _PG_EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        return checks.TIME_FLOOR if micros < 0 else checks.TIME_CEILING


_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_binary_times = TimeMemo(_from_binary)


_decode_json = json.JSONDecoder().raw_decode


def _json_from_server(data: str | bytes) -> Any:
    """A JSON value as PostgreSQL writes one (one value, nothing around it,
    UTF-8): a quarter of ``json.loads``'s time on bytes, which first guesses
    their encoding. Every claimed job reads one."""
    text = data if isinstance(data, str) else data.decode()
    try:
        return _decode_json(text)[0]
    except ValueError:  # what json.loads says of it (a ``json`` value may start with a space)
        return json.loads(text)


def _adapters() -> AdaptersMap:
    """How every connection of the store reads times and JSON, given to it as
    it connects (``context=``): no connection is open without them."""
    adapters = AdaptersMap(psycopg.adapters)
    adapters.register_loader("timestamptz", _LenientTimestamptz)
    adapters.register_loader("timestamptz", _LenientTimestamptzBinary)
    set_json_loads(_json_from_server, adapters)
    return adapters


_ADAPTERS = _adapters()


def _check_if_stirred(conn: psycopg.Connection[Any]) -> None:
    """Before a pooled connection is handed out: an idle connection has
    nothing to say, so one with something to read was told something while
    it waited (the server shutting down, or gone: end of file), and is
    checked with a round trip; the pool replaces it if it is dead. Without
    this, the first call after a restart failed with STORE_UNAVAILABLE in every
    process. A quiet connection costs one select() here, no round trip."""
    if select.select([conn.fileno()], [], [], 0)[0]:
        ConnectionPool.check_connection(conn)


def _describe(url: str) -> str:
    try:
        info = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        # libpq quotes the part it could not read, which may be the password
        raise ConfigError(f"malformed PostgreSQL URL: {_without_password(_reason(exc), url)}") from None
    host = info.get("host", "localhost")
    port = info.get("port", "5432")
    return f"{host}:{port}/{info.get('dbname', '')}"


_PASSWORD = re.compile(r"^[^:/]+://[^:/@\[]*:([^@/]*)@")


def _without_password(text: str, url: str) -> str:
    """``text`` with the URL's password gone, as written and as decoded."""
    found = _PASSWORD.match(url)
    if found and found.group(1):
        for form in {found.group(1), unquote(found.group(1))}:
            text = text.replace(form, "***")
    return text


def _reason(exc: BaseException) -> str:
    # libpq puts the useful part last ("... failed: Connection refused") and
    # adds hint lines we do not want in a one-line message.
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return first.rsplit("failed: ", 1)[-1]


def _job(row: dict) -> Job:
    values = {name: row[name] for name in JOB_COLUMNS}
    values["status"] = Status(values["status"])
    return Job(*values.values())  # in JOB_COLUMNS order; positional is cheaper


def _claimed(row: tuple) -> Job:
    """A row of ``jobs_claim``, in its column order."""
    (id, task, queue, priority, run_at, attempts, max_attempts, owner, lease_token, lease_owner,
     lease_expires_at, last_error_code, last_error_message, created_at, updated_at, started_at,
     stage, manual_retry_count, first_failed_at, idempotency_key, version, payload) = row
    args, kwargs, stage_attempts, checkpoint, dependencies = payload
    return Job(
        id, task, queue, args, kwargs, Status.RUNNING, priority, run_at, attempts, max_attempts,
        owner, lease_token, lease_owner, lease_expires_at, last_error_code, last_error_message,
        None, None, None, created_at, updated_at, started_at, None, None, stage, stage_attempts,
        checkpoint, manual_retry_count, first_failed_at, dependencies, idempotency_key, version,
    )


def _outbox_row(row: dict) -> OutboxRow:
    values = {name: row[name] for name in OUTBOX_COLUMNS}
    values["status"] = OutboxStatus(values["status"])
    return OutboxRow(**values)


def _outbox_change(change: OutboxChange) -> dict[str, Any]:
    return {"status": change.status.value, "provider_id": change.provider_id, "notified": change.notified,
            "error_code": change.error_code, "error_message": change.error_message,
            "send_started": change.send_started, "reconciled": change.reconciled}


def _dead_letter(row: dict) -> DeadLetter:
    return DeadLetter(**{name: row[name] for name in DEAD_LETTER_COLUMNS})


def _letter_filter(where: DeadLetterFilter) -> dict[str, Any]:
    return {
        "error_class": where.error_class, "stage": where.stage, "task": where.task, "owner": where.owner,
        "state": where.state, "older_than_s": _seconds(where.older_than), "newer_than_s": _seconds(where.newer_than),
        "job_id": where.job_id,
    }


def _optional(mapping: Any) -> Any:
    return None if mapping is None else dict(mapping)


def _seconds(delta: timedelta | None) -> float | None:
    return None if delta is None else delta.total_seconds()


def _new_job_json(job: NewJob) -> dict[str, Any]:
    # A key left out reads as NULL (the insert statements put empty arguments
    # and priority 0 in its place): the client encodes and the server parses
    # half as much JSON for the most common job.
    out: dict[str, Any] = {"id": job.id.hex, "task": job.task, "queue": job.queue, "max_attempts": job.max_attempts}
    if job.args:
        out["args"] = job.args
    if job.kwargs:
        out["kwargs"] = job.kwargs
    if job.priority:
        out["priority"] = job.priority
    if job.owner is not None:
        out["owner"] = job.owner
    if job.run_at is not None:
        out["run_at"] = job.run_at.isoformat()
    if job.delay:
        out["delay_s"] = job.delay.total_seconds()
    if job.stage is not None:
        out["stage"] = job.stage
    if job.key is not None:
        out.update(
            idempotency_key=job.key.key, version=job.key.version, kind=job.key.kind,
            fingerprint=job.key.fingerprint,
            nonce=str(uuid4()),  # tells this enqueue's key rows from earlier ones
        )
    return out


_STATUS = {status.value: status for status in Status}


def _finish_json(n: int, item: Finish) -> dict[str, Any]:
    """Item ``n`` of ``jobs_finish``: its kind, its lease and what its kind
    needs; a retry's or a failure's details as one ``error`` object."""
    lease = item.lease
    # ids as 32 hex digits: PostgreSQL reads them as it reads the hyphenated text, which takes longer to write
    out: dict[str, Any] = {"n": n, "kind": KINDS[type(item)], "id": lease.job_id.hex, "token": lease.token.hex,
                           "meta": item.meta if type(item.meta) is dict else dict(item.meta),
                           "dur_b": bucket_of(item.meta.get("duration_ms"))}  # its rollup (core/rollups.py)
    if (wait_ms := item.meta.get("wait_ms")) is not None:
        out["wait_b"] = bucket_of(wait_ms)
    if by_reclaim(item):
        out["reclaim"] = True  # the only write that may end an expired lease
    match item:
        case Completion():
            out["result"] = item.result
        case RetryLater():
            out["delay_s"] = item.delay.total_seconds()
            out["error"] = _present(code=item.error_code, message=item.error_message, stage=item.stage,
                                    stage_attempts=_optional(item.stage_attempts))
        case FailNow():
            out["error"] = _present(code=item.error_code, message=item.error_message,
                                    **{"class": item.error_class or item.error_code}, retryable=item.retryable,
                                    stage=item.stage, stage_attempts=_optional(item.stage_attempts),
                                    stack=item.stack, context=dict(item.context))
        case Cancellation():
            out["by"] = item.by
        case Requeue():
            out.update(delay_s=item.delay.total_seconds(), refund=int(item.refund))
    return out


def _present(**values: Any) -> dict[str, Any]:
    """Only the values given: a JSON null would read as a value (``coalesce`` keeps it)."""
    return {key: value for key, value in values.items() if value is not None}


def _applied(rows: list[dict]) -> set[Lease]:
    """The leases a fenced write applied, from rows of (id, lease_token)."""
    return {Lease(row["id"], row["lease_token"]) for row in rows}


def _lease_json(lease: Lease) -> dict[str, str]:
    return {"id": str(lease.job_id), "token": str(lease.token)}


def _leases(leases: Sequence[Lease]) -> dict[str, list[UUID]]:
    return {"ids": [l.job_id for l in leases], "tokens": [l.token for l in leases]}
