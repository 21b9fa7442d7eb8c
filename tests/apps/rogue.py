"""Tasks that misbehave in ways that used to take their worker down with them."""

from __future__ import annotations

import sys

from redrive import App

app = App()  # REDRIVE_DATABASE_URL comes from the environment


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message for you")


@app.task
def exits() -> None:
    sys.exit(0)


@app.task
def interrupts() -> None:
    raise KeyboardInterrupt


@app.task
async def exits_async() -> None:
    raise SystemExit(3)


@app.task
def too_deep() -> list:
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    return nested


@app.task
def unprintable() -> None:
    raise Unprintable()


@app.task
def fine() -> str:
    return "ok"


@app.task
async def hogs_loop(seconds: float) -> str:
    """Computes on the event loop: what an async task must not do."""
    import time

    until = time.monotonic() + seconds
    spins = 0
    while time.monotonic() < until:
        spins += 1
    return "done"
