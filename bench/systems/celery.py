"""Celery on Redis: one solo-pool worker process each, deep prefetch, no result backend."""

from __future__ import annotations

import sys

from bench import probe
from bench.harness import BenchError

BROKER = "redis://127.0.0.1:6379/7"


def _make():
    from celery import Celery

    app = Celery("bench", broker=BROKER)
    app.conf.update(
        worker_prefetch_multiplier=100, task_ignore_result=True, worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
    )

    @app.task(name="noop")
    def noop(sent_at: float | None = None) -> None:
        probe.hit(sent_at)

    @app.task(name="cpu")
    def cpu() -> None:
        probe.burn()
        probe.hit()

    return app


app = _make()


class Celery:
    name = "Celery (Redis)"

    def reset(self) -> None:
        import redis

        try:
            redis.Redis.from_url(BROKER).flushdb()
        except redis.RedisError as exc:
            raise BenchError(f"cannot reach Redis at {BROKER}: {exc}") from None

    def enqueue(self, n: int, batch: int) -> None:
        noop = app.tasks["noop"]
        if batch == 1:
            for _ in range(n):
                noop.apply_async()
            return
        # Celery has no bulk send: a batch shares one producer and connection.
        with app.producer_or_acquire() as producer:
            for _ in range(n):
                noop.apply_async(producer=producer)

    def enqueue_timed(self, sent_at: float) -> None:
        app.tasks["noop"].apply_async(kwargs={"sent_at": sent_at})

    def worker_argv(self) -> list[str]:
        return [sys.executable, "-m", "celery", "-A", "bench.systems.celery:app", "worker",
                "--pool", "solo", "--loglevel", "warning", "--without-gossip", "--without-mingle",
                "--without-heartbeat"]

    def close(self) -> None:
        pass
