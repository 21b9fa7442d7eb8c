"""A caller that enqueues inside its own transaction, says so, then waits to
be killed before it commits (tests/integration/test_killed_caller.py).

    python -m tests.apps.caller URL ORDER_ID
"""

from __future__ import annotations

import sqlite3
import sys
import time

import psycopg

from redrive import App

url, order_id = sys.argv[1], int(sys.argv[2])
app = App(url)


@app.task
def notify(order: int) -> None:
    return None


if url.startswith("sqlite:///"):
    conn: object = sqlite3.connect(url.removeprefix("sqlite:///"))
    conn.execute("INSERT INTO orders VALUES (?)", (order_id,))  # type: ignore[attr-defined]
else:
    conn = psycopg.connect(url)
    conn.execute("INSERT INTO orders VALUES (%s)", (order_id,))  # type: ignore[attr-defined]
# The app's store opens here, inside the caller's transaction: with the
# schema current it takes no write lock of its own (it would wait on ours).
job = app.enqueue("notify", args=[order_id], conn=conn).job
print(job.id, flush=True)
time.sleep(600)  # killed here, between the enqueue and the commit
