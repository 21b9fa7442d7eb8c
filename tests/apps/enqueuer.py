"""One of several processes enqueueing the same idempotency keys at once.

    python -m tests.apps.enqueuer URL SEED KEYS GO_FILE OUT_FILE

Waits for GO_FILE so every process starts together, enqueues keys 0..KEYS-1
in its own shuffled order (half one by one, half in batches of 50), and
writes what each enqueue returned as JSON to OUT_FILE."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

from redrive import App, JobRequest


def main(url: str, seed: int, keys: int, go: Path, out: Path) -> None:
    app = App(url)

    @app.task
    def offer(user: str, date: str) -> None:
        return None

    def request(n: int) -> JobRequest:
        return JobRequest("offer", kwargs={"user": f"u{n}", "date": "2026-11-22"},
                          idempotency_key=f"2026-11-22:Europe/London:u{n}")

    order = list(range(keys))
    random.Random(seed).shuffle(order)
    _ = app.store  # connect before the start line
    while not go.exists():
        time.sleep(0.005)
    seen = {}
    half = len(order) // 2
    for n in order[:half]:
        result = app.enqueue_many([request(n)])[0]
        seen[n] = (str(result.job.id), result.duplicate)
    for start in range(half, len(order), 50):
        batch = order[start:start + 50]
        for n, result in zip(batch, app.enqueue_many([request(n) for n in batch]), strict=True):
            seen[n] = (str(result.job.id), result.duplicate)
    out.write_text(json.dumps(seen))
    app.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]), Path(sys.argv[5]))
