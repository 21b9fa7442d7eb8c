"""A user's own project, as a newcomer writes one: an App at module level,
tasks, and the code that enqueues them. ``SHOP_PLANTED_BUG`` breaks one
task, to show that its tests catch it (tests/integration/test_user_project.py)."""

from __future__ import annotations

import os
from datetime import timedelta

from redrive import App, Fixed, Permanent, Stage, stage

app = App("sqlite:///shop.db")  # the tests never touch it: they run on redrive_isolate's store
SENT: list[tuple[str, int]] = []  # what the mail relay got


class RelayDown(ConnectionError):
    pass


RELAY_FAILURES: list[int] = []  # how many times the relay refuses before it takes a mail


@app.task(max_attempts=4, backoff=Fixed([timedelta(minutes=2)]))
def send_receipt(order_id: int, email: str) -> None:
    if RELAY_FAILURES and RELAY_FAILURES[0] > 0:
        RELAY_FAILURES[0] -= 1
        raise RelayDown("the relay refused the connection")
    SENT.append((email, order_id))


@app.task(stages=[Stage("charge"), Stage("ship", max_attempts=2)])
async def fulfil(order_id: int, amount_cents: int) -> dict:
    if amount_cents <= 0:
        raise Permanent("nothing to charge", code="BAD_AMOUNT")
    charge = await stage("charge", lambda: {"charged": amount_cents})
    label = await stage("ship", lambda: {"label": f"L-{order_id}"})
    return {**charge, **label}


def place_order(order_id: int, email: str, amount_cents: int) -> None:
    """What the shop's web view does once the order is saved."""
    fulfil.enqueue(order_id, amount_cents)
    send_receipt.enqueue(order_id, email if not os.environ.get("SHOP_PLANTED_BUG") else email.upper())
