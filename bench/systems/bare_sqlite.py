"""The floor under redrive on SQLite: a bare claim-and-complete loop, no library.

Same durability as redrive's store (WAL, synchronous=FULL), batches of 100:
one write transaction marks a batch running, the no-ops run, a second marks
them done. Jobs stay in the table, as redrive keeps history.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from bench import probe
from bench.systems.base import worker_module

BATCH = 100
_SCHEMA = """
CREATE TABLE job (id INTEGER PRIMARY KEY, payload TEXT NOT NULL, status TEXT NOT NULL,
                  run_at REAL NOT NULL);
CREATE INDEX job_due ON job (run_at) WHERE status = 'queued';
"""


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


class BareSqlite:
    name = "bare SQLite loop"

    def __init__(self, workdir: Path) -> None:
        self.path = str(workdir / "bare.db")
        self._conn: sqlite3.Connection | None = None

    def reset(self) -> None:
        self.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        self._conn = _connect(self.path)
        self._conn.executescript(_SCHEMA)

    def _insert(self, payloads: list[str]) -> None:
        now = time.time()
        self._conn.execute("BEGIN IMMEDIATE")
        self._conn.executemany("INSERT INTO job (payload, status, run_at) VALUES (?, 'queued', ?)",
                               [(p, now) for p in payloads])
        self._conn.execute("COMMIT")

    def enqueue(self, n: int, batch: int) -> None:
        for done in range(0, n, batch):
            self._insert(["{}"] * min(batch, n - done))

    def enqueue_timed(self, sent_at: float) -> None:
        self._insert([json.dumps({"sent_at": sent_at})])

    def worker_argv(self) -> list[str]:
        return worker_module("bare_sqlite", self.path)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def work(path: str) -> None:
    conn = _connect(path)
    while True:
        conn.execute("BEGIN IMMEDIATE")
        claimed = conn.execute(
            "UPDATE job SET status = 'running' WHERE id IN (SELECT id FROM job"
            " WHERE status = 'queued' AND run_at <= ? ORDER BY run_at LIMIT ?)"
            " RETURNING id, payload", (time.time(), BATCH)).fetchall()
        conn.execute("COMMIT")
        if not claimed:
            time.sleep(0.001)
            continue
        for _, payload in claimed:
            probe.hit(json.loads(payload).get("sent_at"))
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("UPDATE job SET status = 'done' WHERE id = ?", [(i,) for i, _ in claimed])
        conn.execute("COMMIT")
