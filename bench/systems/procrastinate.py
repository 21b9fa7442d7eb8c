"""Procrastinate over psycopg 3: async no-op tasks, LISTEN/NOTIFY, finished jobs deleted."""

from __future__ import annotations

import asyncio

from bench import probe
from bench.systems.base import fresh_database, worker_module

DATABASE = "bench_procrastinate"
CONCURRENCY = 50


def _app(url: str):
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="noop")
    async def noop(sent_at: float | None = None) -> None:
        probe.hit(sent_at)

    return app


class Procrastinate:
    name = "Procrastinate"

    def __init__(self) -> None:
        self.url = ""
        self._app = None
        self._loop = asyncio.new_event_loop()

    def reset(self) -> None:
        self.close()
        self.url = fresh_database(DATABASE)
        self._app = _app(self.url)
        self._loop.run_until_complete(self._app.open_async())
        self._loop.run_until_complete(self._app.schema_manager.apply_schema_async())

    def enqueue(self, n: int, batch: int) -> None:
        task = self._app.tasks["noop"]

        async def go() -> None:
            if batch == 1:
                for _ in range(n):
                    await task.defer_async()
                return
            for done in range(0, n, batch):
                await task.batch_defer_async(*({} for _ in range(min(batch, n - done))))

        self._loop.run_until_complete(go())

    def enqueue_timed(self, sent_at: float) -> None:
        self._loop.run_until_complete(self._app.tasks["noop"].defer_async(sent_at=sent_at))

    def worker_argv(self) -> list[str]:
        return worker_module("procrastinate", self.url)

    def close(self) -> None:
        if self._app is not None:
            self._loop.run_until_complete(self._app.close_async())
            self._app = None


def work(url: str) -> None:
    app = _app(url)
    app.run_worker(concurrency=CONCURRENCY, delete_jobs="always", install_signal_handlers=True)
