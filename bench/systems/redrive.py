"""redrive on PostgreSQL or SQLite, through its public API and its own CLI worker."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from bench.systems.base import fresh_database
from bench.systems.redrive_jobs import make_app
from redrive import App, JobRequest
from redrive.store.url import open_store

CONCURRENCY = 500  # in-flight no-ops per worker process (claims come in batches up to this); the best of 50-2000


class Redrive:
    def __init__(self, backend: str, workdir: Path, profile: str = "reliable", *, observed: bool = False,
                 synchronous: str = "full") -> None:
        """``observed``: workers log a JSON line per job at info and serve metrics.
        ``synchronous``: how SQLite commits (REDRIVE_SQLITE_SYNCHRONOUS)."""
        self.backend = backend
        self.profile = profile
        self.observed = observed
        self.synchronous = synchronous
        self.name = (f"redrive-{backend}" + ("" if profile == "reliable" else f" ({profile})")
                     + (" (metrics, JSON logs)" if observed else "")
                     + ("" if synchronous == "full" else f" (synchronous={synchronous})"))
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
        os.environ["REDRIVE_SQLITE_SYNCHRONOUS"] = self.synchronous  # the workers' and this process's
        store = open_store(self.url, check_schema=False)
        store.migrate()
        store.close()
        self._app = make_app(self.url, self.profile)

    def enqueue(self, n: int, batch: int, task: str = "noop") -> None:
        if batch == 1:
            for _ in range(n):
                self._app.enqueue(task)
            return
        requests = [JobRequest(task)] * batch
        for done in range(0, n, batch):
            self._app.enqueue_many(requests[: min(batch, n - done)])

    def enqueue_timed(self, sent_at: float) -> None:
        self._app.enqueue("noop", kwargs={"sent_at": sent_at})

    def worker_argv(self) -> list[str]:
        logging = ["--log-level", "info", "--log-format", "json"] if self.observed else ["--log-level", "warning"]
        metrics = ["--metrics-port", "0"] if self.observed else []  # 0: any free port, one per process
        return [sys.executable, "-m", "redrive", *logging, "worker", "bench.systems.redrive_jobs:app",
                "-c", str(CONCURRENCY), "--poll-interval", "1", *metrics]

    def vacuum(self) -> None:
        """What autovacuum does soon after a big drain, now."""
        if self.backend == "pg":
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")

    def scrape_s(self, repeats: int = 20) -> float:
        """The median time to render /metrics (store gauges included) on what the database holds now."""
        import statistics
        import time

        from redrive.metrics import Metrics

        metrics = Metrics(self._app)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            metrics.exposition()
            times.append(time.perf_counter() - start)
        metrics.unsubscribe()
        return statistics.median(times)

    def dashboard_ms(self, repeats: int = 20) -> dict[str, float]:
        """Median times to serve the overview, the first jobs page and the
        login page, from a real server on 127.0.0.1, logged in as an operator."""
        import statistics
        import threading
        import time

        import httpx
        import uvicorn

        from redrive.http import TokenAuth, create_api
        from redrive.http.auth import parse_tokens

        token = "bench-operator-0123456789"
        api = create_api(self._app, auth=TokenAuth(parse_tokens([f"{token}=operator:bench"])), rate_limit="off")
        server = uvicorn.Server(uvicorn.Config(api, host="127.0.0.1", port=0, log_config=None, access_log=False))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the dashboard's server did not start")
            time.sleep(0.01)
        base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        times: dict[str, float] = {}
        try:
            with httpx.Client(base_url=base, headers={"Origin": base}, timeout=60) as browser:
                if browser.post("/login", data={"token": token}).status_code != 303:
                    raise RuntimeError("could not log in to the dashboard")
                for name, path in (("overview", "/"), ("first jobs page", "/jobs"), ("login page", "/login")):
                    samples = []
                    for _ in range(repeats + 1):  # the first warms the caches and is not counted
                        start = time.perf_counter()
                        answer = browser.get(path)
                        samples.append(time.perf_counter() - start)
                        if answer.status_code != 200:
                            raise RuntimeError(f"the dashboard answered {path} with {answer.status_code}")
                    times[f"{name} ms"] = statistics.median(samples[1:]) * 1000
        finally:
            server.should_exit = True
            thread.join(10)
        return times

    def heartbeats(self, jobs: int) -> Callable[[], None]:
        """Claims ``jobs`` waiting jobs as a worker does, and answers what a
        worker's heartbeat then writes while they run 30 s at the default
        lease: three extensions of each lease, in batches as a worker holds them."""
        from datetime import timedelta

        store, ttl = self._app.store, timedelta(seconds=30)
        leases = []
        while len(leases) < jobs:
            claimed = store.jobs_claim(queues=["default"], limit=min(CONCURRENCY, jobs - len(leases)),
                                       worker_id="bench:4242:5d1a45", lease_ttl=ttl)  # a worker id's length
            if not claimed:
                raise RuntimeError(f"{jobs - len(leases)} of {jobs} jobs to claim were not waiting")
            leases += [job.lease for job in claimed]

        def three_heartbeats() -> None:
            for _ in range(3):
                for at in range(0, len(leases), CONCURRENCY):
                    batch = leases[at:at + CONCURRENCY]
                    if len(store.leases_extend(leases=batch, lease_ttl=ttl)) != len(batch):
                        raise RuntimeError("a lease the bench holds was not extended")
        return three_heartbeats

    def disconnect(self) -> None:
        """Closes the app's connection; its next enqueue opens another."""
        if self._app is not None:
            self._app.close()

    def close(self) -> None:
        self.disconnect()
        self._app = None
