"""What a benchmark job does: count itself in the worker process.

Every system's no-op job calls ``hit()``. A daemon thread writes the counts to
``$BENCH_PROBE_DIR/<pid>.json`` every 50 ms, so the harness reads progress from
files and no system pays for a result backend it would not otherwise use.
``time.monotonic`` is CLOCK_MONOTONIC, shared by every process on the machine,
so first/last times from several workers can be compared.
"""

from __future__ import annotations

import json
import os
import threading
import time

_lock = threading.Lock()
# cpu_first: the process's CPU seconds (every thread) at the first job; cpu_last at the last job
# whose count is a multiple of CPU_EVERY, and cpu_jobs that count: the worker's own cost per job
# without its idle polling after the last. Not read at every job: in a worker process with a few
# threads the read cost 2-3 µs of CPU a job (a tenth of what it measured on redrive-pg) and 4 % of
# the throughput, for every system alike (docs/performance.md).
CPU_EVERY = 64
_state: dict = {"count": 0, "first": None, "last": None, "marks": {}, "lat": [], "cpu_first": None,
                "cpu_last": None, "cpu_jobs": None}
_marks = sorted(int(m) for m in os.environ.get("BENCH_MARKS", "").split(",") if m)
_writer: threading.Thread | None = None


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def hit(sent_at: float | None = None) -> None:
    """``sent_at``: the ``time.time()`` taken just before the job was enqueued."""
    now = time.monotonic()
    started_at = time.time() if sent_at is not None else None
    with _lock:
        count = _state["count"] = _state["count"] + 1
        if _state["first"] is None:
            _state["first"], _state["cpu_first"] = now, time.process_time()
            _start_writer()
        elif count % CPU_EVERY == 0:
            _state["cpu_last"], _state["cpu_jobs"] = time.process_time(), count
        _state["last"] = now
        if started_at is not None:
            _state["lat"].append(started_at - sent_at)
        if _marks and _state["count"] == _marks[0]:
            _state["marks"][_marks.pop(0)] = [now, rss_kib()]


def _start_writer() -> None:
    global _writer
    directory = os.environ.get("BENCH_PROBE_DIR")
    if not directory or _writer is not None:
        return
    path = os.path.join(directory, f"{os.getpid()}.json")

    def write() -> None:
        while True:
            with _lock:
                text = json.dumps(_state)
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, path)
            time.sleep(0.05)

    _writer = threading.Thread(target=write, daemon=True, name="bench-probe")
    _writer.start()


BURN = 140_000  # iterations: about 10 ms of pure Python on the bench machine


def burn(n: int = BURN) -> int:
    """CPU-bound work that holds the GIL throughout, as parsing or rendering does."""
    total = 0
    for i in range(n):
        total += i * i
    return total
