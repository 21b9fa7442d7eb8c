"""Tasks on queues with limits every worker shares (for worker-process tests)."""

from __future__ import annotations

import os
import time
from datetime import timedelta

from redrive import App, Rate, current_job
from tests.apps.drain import span as _span

app = App()  # REDRIVE_DATABASE_URL comes from the environment
app.queue("metered", rate=Rate(40, per=timedelta(milliseconds=500)))
app.queue("gateway", concurrency=3)


@app.task(queue="metered")
def metered(key: str) -> None:
    """Notes when its body began (wall clock), to count starts as an upstream would see them."""
    with open(os.path.join(os.environ["REDRIVE_TEST_LOG_DIR"], f"metered-{os.getpid()}.log"), "a") as log:
        log.write(f"{current_job().id} {time.time()}\n")


@app.task(queue="gateway")
def span(key: str, seconds: float) -> None:
    _span.fn(key, seconds)
