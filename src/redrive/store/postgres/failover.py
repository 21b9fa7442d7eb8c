"""A deployment may name its primary and its standbys in one URL, libpq's
multi-host form (``postgresql://u@primary:5432,standby:5432/db``): each
connection goes to the server that takes writes, so after a failover to the
promoted standby. What redrive adds (docs/storage.md): it asks for the
writable server unless the URL says otherwise, it counts a server that takes
no writes (a standby not yet promoted) as the database being unavailable,
and it says once, in one line, when its connections reach another server."""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg

log = logging.getLogger("redrive.store.postgres")


def servers(info: dict[str, Any]) -> list[str]:
    """Each ``host:port`` a URL names, in its order."""
    hosts = (info.get("host") or "localhost").split(",")
    ports = (info.get("port") or "5432").split(",")
    if len(ports) == 1:
        ports = ports * len(hosts)
    return [f"{host}:{port or '5432'}" for host, port in zip(hosts, ports, strict=False)]  # "a,b:6000": ",6000"


def writable(info: dict[str, Any]) -> dict[str, str]:
    """The libpq setting that makes a connection of a multi-host URL pass
    over a server in recovery, unless the URL chose."""
    if len(servers(info)) > 1 and "target_session_attrs" not in info:
        return {"target_session_attrs": "read-write"}
    return {}


def in_recovery(conn: psycopg.Connection[Any]) -> bool:
    """Whether a connected server is a standby: it answers, but takes no writes."""
    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    return bool(row and (row["pg_is_in_recovery"] if isinstance(row, dict) else row[0]))


class Reached:
    """Called with each new pooled connection: says when the server they
    reach changes (a failover), once per change."""

    def __init__(self, where: str) -> None:
        self._where = where
        self._server: str | None = None
        self._lock = threading.Lock()

    def __call__(self, conn: psycopg.Connection[Any]) -> None:
        server = f"{conn.info.host}:{conn.info.port}"
        with self._lock:
            before, self._server = self._server, server
        if before is not None and before != server:
            log.warning("PostgreSQL at %s: connections now reach %s (they reached %s): a failover", self._where,
                        server, before)
