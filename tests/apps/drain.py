"""Tasks for worker-process tests. Every execution appends a line to a log file
of its own process, so a test can count how often each job's body ran."""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import time
from datetime import timedelta

from redrive import App, Fixed, Permanent, Rate, Snooze, Transient, Workflow, current_job, spawn

app = App()  # REDRIVE_DATABASE_URL comes from the environment
app.queue("metered", rate=Rate(4, per=timedelta(seconds=2)))  # starts a window, whatever the workers' clocks


def _record(key: str) -> dict:
    job = current_job()
    log_dir = os.environ["REDRIVE_TEST_LOG_DIR"]
    with open(os.path.join(log_dir, f"exec-{os.getpid()}.log"), "a") as log:
        log.write(f"{key} {job.attempts}\n")
    return {"key": key, "pid": os.getpid()}


@app.task
def record(key: str) -> dict:
    return _record(key)


@app.task
def snooze_once(key: str, seconds: float) -> dict:
    """Snoozes ``seconds`` on its first run (a marker file says it did), then records."""
    marker = os.path.join(os.environ["REDRIVE_TEST_LOG_DIR"], f"snoozed-{key}")
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise Snooze(timedelta(seconds=seconds))
    return _record(key)


@app.task(backoff=Fixed([timedelta(seconds=3)]))
def retry_once(key: str) -> dict:
    """Fails its first attempt (a retry 3 s later, by its backoff), then records."""
    if current_job().attempts == 1:
        raise Transient("the first attempt fails")
    return _record(key)


@app.task
def split(key: str, parts: int) -> dict:
    """Spawns ``parts`` children (``record``) and a join after them, created with its success."""
    children = Workflow(f"parts of {key}")
    fan = children.map((record.call(f"{key}-{n}") for n in range(parts)), name="parts")
    children.add(record.call(f"{key}-join"), name="join", after=fan)
    spawned = spawn(children)
    return {**_record(key), "spawned": str(spawned)}


@app.task
def sleep_then_record(key: str, seconds: float, first_attempt_only: bool = False) -> dict:
    # Its start is logged apart from its end: a job the store shows running may
    # be one whose claim has not reached the worker yet.
    with open(os.path.join(os.environ["REDRIVE_TEST_LOG_DIR"], f"began-{os.getpid()}.log"), "a") as log:
        log.write(f"{key} {current_job().attempts}\n")
    if not first_attempt_only or current_job().attempts == 1:
        time.sleep(seconds)
    return _record(key)


@app.task
async def async_sleep_then_record(key: str, seconds: float) -> dict:
    await asyncio.sleep(seconds)
    return _record(key)


@app.task
def span(key: str, seconds: float) -> None:
    """Records when its body ran (wall clock, this process), to measure how many ran at once."""
    began = time.time()
    time.sleep(seconds)
    job = current_job()
    with open(os.path.join(os.environ["REDRIVE_TEST_LOG_DIR"], f"span-{os.getpid()}.log"), "a") as log:
        log.write(f"{key} {job.queue} {began} {time.time()}\n")


@app.task(max_attempts=3, hard_timeout=timedelta(seconds=1))
def spin_first(key: str) -> dict:
    """Pure Python past its hard limit on the first attempt: nothing but a kill stops it."""
    if current_job().attempts == 1:
        while True:
            pass
    return _record(key)


@app.task(max_attempts=1, timeout=timedelta(seconds=1), hard_timeout=timedelta(seconds=2))
def oversleep(hours: float) -> None:
    """Sleeps on past its soft limit, which abandons its thread; its hard limit must still hold."""
    time.sleep(hours * 3600)


_hoard: list[bytearray] = []


@app.task
def hoard(key: str, mb: int) -> dict:
    """Keeps ``mb`` MiB for as long as its process lives (a leak), every page touched."""
    _hoard.append(bytearray(b"\x01") * (mb << 20))
    return _record(key)


@app.task(max_attempts=1)
def linger(seconds: float) -> None:
    """One attempt only: a crash during it is the job's end."""
    time.sleep(seconds)


@app.task
def collector() -> dict:
    """How the worker process running this job set Python's garbage collector."""
    return {"frozen": gc.get_freeze_count(), "young": gc.get_threshold()[0], "pid": os.getpid()}


def _fail_holding(megabytes: int, keep_error: bool) -> None:
    buffer = bytearray(megabytes * 1024 * 1024)
    buffer[-1] = 1
    try:
        raise ValueError("the converter gave up")
    except ValueError as error:
        kept = error if keep_error else None
        raise Permanent("conversion failed", code="CONVERSION_FAILED") from kept


@app.task(max_attempts=1)
def fail_holding(megabytes: int, keep_error: bool = False) -> None:
    """Fails while its frame holds a big buffer (and, with ``keep_error``, the
    error itself: a reference cycle through the frame, as user code makes)."""
    _fail_holding(megabytes, keep_error)


@app.task(max_attempts=1)
async def fail_holding_async(megabytes: int, keep_error: bool = False) -> None:
    """``fail_holding`` on the event loop."""
    _fail_holding(megabytes, keep_error)


@app.task
def peak_memory() -> dict:
    """The peak resident memory of the worker process running this job, in MiB."""
    return {"peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
