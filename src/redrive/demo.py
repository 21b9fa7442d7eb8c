"""The demo: a worker draining a mix of jobs on SQLite, some failing and retrying."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import sys
import time
from collections import Counter
from datetime import timedelta

from redrive.app import App, JobRequest
from redrive.core.states import TERMINAL, Status
from redrive.errors import Permanent, Transient
from redrive.runtime.context import current_job
from redrive.runtime.worker import Worker
from redrive.settings import Settings

DEMO_DATABASE = "redrive-demo.db"


def build_app(database_url: str) -> App:
    app = App(settings=Settings.load(database_url=database_url, retry_max_attempts=4))

    @app.task
    def resize_image(image_id: int) -> dict:
        time.sleep(random.uniform(0.05, 0.3))
        return {"image": image_id, "thumbnail": f"thumb-{image_id}.png"}

    @app.task
    async def summarize_with_llm(doc_id: int) -> dict:
        await asyncio.sleep(random.uniform(0.05, 0.2))
        # A flaky upstream: the first attempts of some documents hit a 503.
        if doc_id % 3 == 0 and current_job().attempts < 3:
            raise Transient("LLM provider answered 503", code="UPSTREAM_5XX")
        return {"doc": doc_id, "summary": f"summary of document {doc_id}"}

    @app.task
    def send_email(to: str) -> dict:
        time.sleep(0.05)
        if not to.endswith("@example.com"):
            raise Permanent(f"{to} is not a deliverable address", code="INVALID_RECIPIENT")
        return {"delivered_to": to}

    return app


def _requests(count: int) -> list[JobRequest]:
    requests = []
    for n in range(count):
        match n % 4:
            case 0 | 1:
                requests.append(JobRequest("resize_image", args=[n]))
            case 2:
                requests.append(JobRequest("summarize_with_llm", args=[n]))
            case 3:
                to = f"user{n}@nowhere.invalid" if n % 8 == 7 else f"user{n}@example.com"
                requests.append(JobRequest("send_email", args=[to]))
    return requests


def run_demo(*, database_url: str | None, jobs: int, concurrency: int) -> int:
    if database_url is None:
        for suffix in ("", "-wal", "-shm", "-clock"):
            if os.path.exists(DEMO_DATABASE + suffix):
                os.remove(DEMO_DATABASE + suffix)
        database_url = f"sqlite:///{DEMO_DATABASE}"
    app = build_app(database_url)
    try:
        return asyncio.run(_drain(app, jobs, concurrency, database_url))
    finally:
        app.close()


async def _drain(app: App, count: int, concurrency: int, database_url: str) -> int:
    created = app.enqueue_many(_requests(count))
    ids = {r.job.id for r in created}
    print(f"redrive demo: {count} jobs on {database_url}, one worker running {concurrency} at once", flush=True)
    worker = Worker(app.client, concurrency=concurrency, poll_interval=timedelta(milliseconds=200),
                    lease_ttl=timedelta(seconds=10))
    running = asyncio.create_task(worker.run())
    started = time.monotonic()
    while True:
        await asyncio.sleep(0.5)
        mine = [j for j in app.client.jobs(limit=count * 2) if j.id in ids]
        by_status = Counter(j.status for j in mine)
        waiting_retry = sum(1 for j in mine if j.status is Status.QUEUED and j.last_error_code)
        print(
            f"[{time.monotonic() - started:5.1f}s] queued {by_status[Status.QUEUED]:3}  "
            f"running {by_status[Status.RUNNING]:2}  succeeded {by_status[Status.SUCCEEDED]:3}  "
            f"failed {by_status[Status.FAILED]:2}  waiting to retry {waiting_retry:2}",
            flush=True,
        )
        if all(j.status in TERMINAL for j in mine):
            break
    worker.stop()
    await running
    retries = sum(j.attempts - 1 for j in mine)
    failures = Counter(j.error_code for j in mine if j.status is Status.FAILED)
    print(
        f"done in {time.monotonic() - started:.1f}s: {by_status[Status.SUCCEEDED]} succeeded, "
        f"{by_status[Status.FAILED]} failed {dict(failures)}, {retries} retries",
        flush=True,
    )
    command = _this_command()
    print(f"look closer: {command} jobs list --database-url {database_url}", flush=True)
    print(f"   the failed: {command} dead list --database-url {database_url}", flush=True)
    return 0


def _this_command() -> str:
    """How to run redrive again from here: the hints must work as printed,
    also when the command lives in a virtual environment not on PATH."""
    invoked = sys.argv[0]
    if os.path.basename(invoked) == "redrive" and os.path.isfile(invoked):
        found = shutil.which("redrive")
        if found and os.path.samefile(found, invoked):
            return "redrive"
        relative = os.path.relpath(invoked)
        return relative if relative.startswith(".") else f"./{relative}"
    return f"{sys.executable} -m redrive"
