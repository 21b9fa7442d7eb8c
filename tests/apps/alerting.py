"""Jobs that fail for good (their messages carry planted secrets) and jobs
that succeed, for notification tests; notifications come from the
environment, as `redrive worker` sets them up."""

from __future__ import annotations

from redrive import App, Permanent

app = App()  # REDRIVE_DATABASE_URL comes from the environment


@app.task
def doomed(doc: str, secret: str) -> None:
    raise Permanent(f"cannot convert {doc}: {secret}", code="BAD_INPUT")


@app.task
def fine(n: int) -> int:
    return n
