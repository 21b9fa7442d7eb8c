"""redrive on PostgreSQL or SQLite, through its public API and its own CLI worker."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bench.systems.base import fresh_database
from bench.systems.redrive_jobs import make_app
from redrive import App, JobRequest
from redrive.store.url import open_store

CONCURRENCY = 500  # in-flight no-ops per worker process (claims come in batches up to this); the best of 50-2000


class Redrive:
    def __init__(self, backend: str, workdir: Path, profile: str = "reliable") -> None:
        self.backend = backend
        self.profile = profile
        self.name = f"redrive-{backend}" + ("" if profile == "reliable" else f" ({profile})")
        self._workdir = workdir
        self._app: App | None = None
        self.url = ""

    def reset(self) -> None:
        self.close()
        if self.backend == "pg":
            self.url = fresh_database("bench_redrive")
        else:
            path = self._workdir / "redrive.db"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            self.url = f"sqlite:///{path}"
        os.environ["REDRIVE_DATABASE_URL"] = self.url
        os.environ["BENCH_PROFILE"] = self.profile
        store = open_store(self.url, check_schema=False)
        store.migrate()
        store.close()
        self._app = make_app(self.url, self.profile)

    def enqueue(self, n: int, batch: int) -> None:
        if batch == 1:
            for _ in range(n):
                self._app.enqueue("noop")
            return
        requests = [JobRequest("noop")] * batch
        for done in range(0, n, batch):
            self._app.enqueue_many(requests[: min(batch, n - done)])

    def enqueue_timed(self, sent_at: float) -> None:
        self._app.enqueue("noop", kwargs={"sent_at": sent_at})

    def worker_argv(self) -> list[str]:
        return [sys.executable, "-m", "redrive", "--log-level", "warning", "worker",
                "bench.systems.redrive_jobs:app", "-c", str(CONCURRENCY), "--poll-interval", "1"]

    def close(self) -> None:
        if self._app is not None:
            self._app.close()
            self._app = None
