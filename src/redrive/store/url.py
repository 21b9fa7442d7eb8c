"""Open a store from a database URL."""

from __future__ import annotations

from urllib.parse import urlsplit

from redrive.errors import ConfigError
from redrive.store.port import Store

SCHEMES = ("sqlite", "postgresql", "postgres", "memory")


def open_store(url: str, *, migrate: bool = False) -> Store:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``postgresql://…``, ``memory://``.

    SQLite migrates itself on open; PostgreSQL checks its schema unless
    ``migrate`` asks it to apply pending migrations first.
    """
    scheme = urlsplit(url).scheme if "://" in url else ""
    if scheme == "sqlite":
        path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else ""
        if not path:
            raise ConfigError(
                f"malformed SQLite URL {url!r}: use sqlite:///relative.db or sqlite:////absolute.db"
            )
        from redrive.store.sqlite.store import SQLiteStore

        return SQLiteStore(path)
    if scheme in ("postgresql", "postgres"):
        from redrive.store.postgres.store import PostgresStore

        return PostgresStore(url, migrate=migrate)
    if scheme == "memory":
        from redrive.store.memory import MemoryStore

        return MemoryStore()
    raise ConfigError(
        f"unsupported database URL {_redact(url)!r}: it must start with one of "
        + ", ".join(f"{s}://" for s in SCHEMES)
    )


def _redact(url: str) -> str:
    parts = urlsplit(url) if "://" in url else None
    if parts and parts.password:
        return url.replace(f":{parts.password}@", ":***@")
    return url
