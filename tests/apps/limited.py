"""Tasks on queues with limits every worker shares (for worker-process tests)."""

from __future__ import annotations

from datetime import timedelta

from redrive import App, Rate
from tests.apps.drain import span as _span

app = App()  # REDRIVE_DATABASE_URL comes from the environment
app.queue("metered", rate=Rate(40, per=timedelta(milliseconds=500)))
app.queue("gateway", concurrency=3)


@app.task(queue="metered")
def metered(key: str) -> None:
    return None


@app.task(queue="gateway")
def span(key: str, seconds: float) -> None:
    _span.fn(key, seconds)
