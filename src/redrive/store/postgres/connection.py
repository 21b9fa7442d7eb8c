"""PostgreSQL reached: the pool, every call's deadline (``calls_within``),
the connection that finds a restarted server again, errors as redrive's
(``StoreUnavailable``, ``StoreTimeout``, ``StoreFull``), the named
queries run on the database's clock or a test's, and the schema's
migrations."""

from __future__ import annotations

import logging
import re
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg.rows import RowFactory, dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from redrive.core.states import Status
from redrive.errors import ConfigError, SchemaOutdated, StoreError, StoreFull, StoreTimeout, StoreUnavailable
from redrive.store.postgres.codecs import _adapters
from redrive.store.postgres.deadlines import Deadlines, Overran
from redrive.store.postgres.failover import Reached, in_recovery, servers, writable
from redrive.store.postgres.places import Places
from redrive.store.sql import load_migrations, load_queries

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
# A job as an insert statement wrote it: its status, due time and creation time.
Created = tuple[Status, datetime, datetime]
_ADAPTERS = _adapters()
_PASSWORD = re.compile(r"^[^:/]+://[^:/@\[]*:([^@/]*)@")
_STATUS = {status.value: status for status in Status}


def _on_clock(name: str, sql: str) -> str:
    """A query that reads the given clock instead of the database's."""
    if name.startswith("migration") or name == "wakeups_listen":
        return sql  # run outside _run, on the database's own clock
    return re.sub(r"\b(?:clock_timestamp|now)\(\)", "%(now)s::timestamptz", sql)


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
    return {**{key: value for key, value in wanted.items() if key not in given}, **writable(given)}


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
    return f"{','.join(servers(info))}/{info.get('dbname', '')}"


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


def _rows(cur: psycopg.Cursor[Any]) -> list:
    """What a statement answered: its rows, or none. (Asking ``description``
    builds a column object for each column on every call.)"""
    result = cur.pgresult
    return cur.fetchall() if result is not None and result.status == ExecStatus.TUPLES_OK else []


def _savepoint(conn: psycopg.Connection[Any]) -> AbstractContextManager[Any]:
    """A savepoint in the caller's transaction. On an idle connection outside
    autocommit, psycopg's ``transaction()`` would begin a transaction of its own
    and commit it at the end of the block; a first statement starts the
    caller's transaction instead, as any statement of theirs would."""
    if not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        conn.execute("SELECT 1")
    return conn.transaction()


class Connected:
    """A pool on one database, with deadlines, and its queries."""

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
        self._reached = Reached(self._where)
        self._pool = self._new_pool()
        self._places = Places()  # where the rows of the jobs this store claimed are (places.py)
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
            configure=self._reached,
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
            with psycopg.connect(self.url, **{**self._link, "connect_timeout": _PROBE_TIMEOUT_S}) as conn:
                return not in_recovery(conn)  # a standby answers, but is still no place to write
        except psycopg.OperationalError:
            return False

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
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            # A standby (not yet promoted, or a URL that leads to it alone): as
            # while the server is down, calls fail at once until one takes writes
            if self._down is None:
                self._down = time.monotonic()
            raise StoreUnavailable(f"PostgreSQL at {self._where} is read-only (a standby not yet promoted?): "
                                   "nothing was written") from exc
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
