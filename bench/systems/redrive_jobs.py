"""The redrive app the benchmark's workers run.

``BENCH_PROFILE=reliable`` (the default) declares the no-op's dependency, so
every job passes the breaker gate and records its outcome in the shared
breaker; ``minimal`` declares none.
"""

from __future__ import annotations

import os

from bench import probe
from redrive import App, Dependency


def make_app(url: str | None, profile: str) -> App:
    reliable = profile in ("reliable", "limits")
    app = App(url, dependencies=[Dependency("upstream")] if reliable else [])
    if profile == "limits":  # the reliable profile under a limit that every claim reads and none reaches
        app.queue("default", concurrency=100_000)

    @app.task(dependencies=["upstream"] if reliable else ())
    async def noop(sent_at: float | None = None) -> None:
        probe.hit(sent_at)

    @app.task
    def cpu() -> None:
        probe.burn()
        probe.hit()

    return app


app = make_app(None, os.environ.get("BENCH_PROFILE", "reliable"))
