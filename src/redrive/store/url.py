"""Open a store from a database URL."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from typing import Any
from urllib.parse import urlsplit

from redrive.errors import ConfigError
from redrive.settings import Settings
from redrive.store.operations import FullStore

SCHEMES = ("sqlite", "postgresql", "postgres", "memory")


def open_store(url: str, *, check_schema: bool = True, must_exist: bool = False, joining: Any = None,
               settings: Settings | None = None) -> FullStore:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``postgresql://…``, ``memory://``.

    SQLite migrates itself on open; PostgreSQL refuses a schema older than the
    code unless ``check_schema`` is off (for ``redrive migrate``). With
    ``must_exist`` (operators reading a database) a SQLite file that does not
    exist is an error rather than a new, empty database. ``joining``: the
    caller's connection when the store opens to enqueue in its transaction.
    ``settings``: for PostgreSQL, how long one call may take
    (``store_timeout``) and what pools its connections
    (``database_pool_mode``, ``listen_url``); for SQLite, how it commits
    (``sqlite_synchronous``); the defaults without.
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme == "sqlite":
        path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else ""
        if not path:
            raise ConfigError(
                f"malformed SQLite URL {url!r}: use sqlite:///relative.db or sqlite:////absolute.db"
            )
        if must_exist and not os.path.exists(path):
            raise ConfigError(f"there is no SQLite database at {path} (check the path, or --database-url)")
        if must_exist and not _holds_redrive(path):
            raise ConfigError(f"the SQLite database at {path} is not one of redrive's (it has no redrive tables); "
                              "check the path, or --database-url")
        from redrive.store.sqlite.store import SQLiteStore

        return SQLiteStore(path, joining=joining if isinstance(joining, sqlite3.Connection) else None,
                           synchronous=settings.sqlite_synchronous if settings else "full")
    if scheme in ("postgresql", "postgres"):
        from redrive.store.postgres.store import PostgresStore

        if settings is None:
            return PostgresStore(url, check_schema=check_schema)
        return PostgresStore(url, check_schema=check_schema, deadline=settings.store_timeout,
                             pool_mode=settings.database_pool_mode, listen_url=settings.listen_url)
    if scheme == "memory":
        from redrive.store.memory import MemoryStore

        return MemoryStore()
    raise ConfigError(
        f"unsupported database URL {_redact(url)!r}: it must start with one of "
        + ", ".join(f"{s}://" for s in SCHEMES)
    )


def _holds_redrive(path: str) -> bool:
    """Whether a file is a redrive database, read without changing it (an
    operator pointed at another application's file must not add our tables)."""
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'redrive_job'").fetchone() is not None
    except sqlite3.DatabaseError:  # not a database at all, or locked past the timeout
        return False


def _redact(url: str) -> str:
    """Hide a password: the URL is about to be shown in an error."""
    try:
        password = urlsplit(url).password if "://" in url else None
    except ValueError:
        return url.split("://", 1)[0] + "://…"
    return url.replace(f":{password}@", ":***@") if password else url
