"""What a system's backends wait on, sampled from ``pg_stat_activity``
(``bench.dbcost``'s phases with many workers)."""

from __future__ import annotations

import threading
import time

import psycopg

from bench.cluster import Cluster


class Sampler:
    """``pg_stat_activity`` of one database, read every few milliseconds on a
    thread of its own: how long its backends waited on locks, and how long
    they sat idle inside a transaction (a row lock held across a round trip
    shows there)."""

    INTERVAL_S = 0.002

    def __init__(self, cluster: Cluster, database: str) -> None:
        self._conn = psycopg.connect(f"{cluster.server}/postgres", autocommit=True)
        self._database = database
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self.lock_wait_s = self.idle_s = 0.0

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()

    def _watch(self) -> None:
        query = ("SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'), "
                 "count(*) FILTER (WHERE state = 'idle in transaction') FROM pg_stat_activity WHERE datname = %s")
        last = time.perf_counter()
        while not self._stop.wait(self.INTERVAL_S):
            waiting, idle = self._conn.execute(query, (self._database,)).fetchone()
            now = time.perf_counter()
            self.lock_wait_s += waiting * (now - last)
            self.idle_s += idle * (now - last)
            last = now
