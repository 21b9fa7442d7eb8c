"""Huey on SQLite: the embedded peer a SQLite user would pick. Its SQLite
storage with the durability redrive's store keeps (WAL, synchronous=FULL:
``fsync=True``), results off (a no-op returns nothing to keep), one
consumer process with one worker thread (more threads only contend for
SQLite's one writer) polling every millisecond when idle."""

from __future__ import annotations

import sys
from pathlib import Path

from bench import probe


def _make(path: str):
    from huey import SqliteHuey

    huey = SqliteHuey("bench", filename=path, fsync=True, results=False)

    @huey.task(name="noop")
    def noop(sent_at: float | None = None) -> None:
        probe.hit(sent_at)

    return huey, noop


class Huey:
    name = "Huey (SQLite)"

    def __init__(self, workdir: Path) -> None:
        self.path = str(workdir / "huey.db")
        self._huey = self._noop = None

    def reset(self) -> None:
        self.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        self._huey, self._noop = _make(self.path)

    def enqueue(self, n: int, batch: int) -> None:
        # Huey has no batch write: ``map`` enqueues one message (one transaction) per job.
        if batch == 1:
            for _ in range(n):
                self._noop()
            return
        for done in range(0, n, batch):
            self._noop.map([() for _ in range(min(batch, n - done))])

    def enqueue_timed(self, sent_at: float) -> None:
        self._noop(sent_at)

    def worker_argv(self) -> list[str]:
        return [sys.executable, "-m", "bench.worker", "huey", self.path]

    def close(self) -> None:
        if self._huey is not None:
            self._huey.storage.close()
            self._huey = self._noop = None


def work(path: str) -> None:
    from huey.consumer import Consumer

    huey, _ = _make(path)
    Consumer(huey, workers=1, worker_type="thread", periodic=False, initial_delay=0.001, backoff=1.0,
             max_delay=0.001).run()
