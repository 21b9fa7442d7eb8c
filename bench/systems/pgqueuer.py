"""PgQueuer over asyncpg: batch dequeues of 100, LISTEN/NOTIFY, its own schema."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import timedelta

from bench import probe
from bench.systems.base import fresh_database, worker_module

DATABASE = "bench_pgqueuer"
BATCH = 100
# PgQueuer folds its log into statistics every 30 s (its default); bench.dbcost
# sets 0 (never), so that a phase slowed past 30 s (under callgrind) is
# measured as the short ones are: without that later aggregation
AGGREGATE_S = "BENCH_PGQUEUER_AGGREGATE_S"


def _payload(sent_at: float | None = None) -> bytes | None:
    return None if sent_at is None else json.dumps({"sent_at": sent_at}).encode()


class PgQueuer:
    name = "PgQueuer"

    def __init__(self) -> None:
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._conn = None
        self._queries = None

    def reset(self) -> None:
        self.close()
        self.url = fresh_database(DATABASE)
        subprocess.run([sys.executable, "-m", "pgqueuer", "--pg-dsn", self.url, "install"],
                       check=True, capture_output=True)
        self._loop.run_until_complete(self._open())

    async def _open(self) -> None:
        import asyncpg
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.queries import Queries

        self._conn = await asyncpg.connect(self.url)
        self._queries = Queries(AsyncpgDriver(self._conn))

    def enqueue(self, n: int, batch: int) -> None:
        async def go() -> None:
            if self._conn is None:  # closed by close(): reopened, as a pool would
                await self._open()
            if batch == 1:
                for _ in range(n):
                    await self._queries.enqueue("noop", None)
                return
            for done in range(0, n, batch):
                size = min(batch, n - done)
                await self._queries.enqueue(["noop"] * size, [None] * size, [0] * size)

        self._loop.run_until_complete(go())

    def enqueue_timed(self, sent_at: float) -> None:
        self._loop.run_until_complete(self._queries.enqueue("noop", _payload(sent_at)))

    def worker_argv(self) -> list[str]:
        return worker_module("pgqueuer", self.url)

    def close(self) -> None:
        if self._conn is not None:
            self._loop.run_until_complete(self._conn.close())
            self._conn = None


def work(url: str) -> None:
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries

    async def main() -> None:
        conn = await asyncpg.connect(url)
        qm = QueueManager(Queries(AsyncpgDriver(conn)))

        @qm.entrypoint("noop")
        async def noop(job) -> None:
            probe.hit(json.loads(job.payload)["sent_at"] if job.payload else None)

        aggregate = timedelta(seconds=float(os.environ.get(AGGREGATE_S, "30")))
        await qm.run(batch_size=BATCH, dequeue_timeout=timedelta(seconds=1), log_aggregation_interval=aggregate)

    asyncio.run(main())
