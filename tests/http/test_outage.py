"""PostgreSQL stopped and started while clients call the API (a server of
the test's own): during the outage only 503 STORE_UNAVAILABLE, never a 500,
and afterwards normal answers without restarting the API."""

from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import closing

import pytest

from redrive.http import TokenAuth, create_api
from redrive.http.auth import parse_tokens
from redrive.store.postgres.store import PostgresStore
from redrive.testing import wait_for
from tests.figures import record
from tests.http.conftest import SPECS, as_, make_app, serving

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

OUTAGE_S = 5


def test_an_outage_answers_503_and_the_api_recovers_by_itself(cluster) -> None:
    with closing(PostgresStore(cluster.url, check_schema=False)) as migrating:
        migrating.migrate()
    app = make_app(cluster.url)
    seen: Counter[str] = Counter()
    stop = threading.Event()
    with serving(create_api(app, auth=TokenAuth(parse_tokens(SPECS)))) as url:
        def call() -> None:
            client = as_("alice", url)
            while not stop.is_set():
                for answer in (client.post("/api/v1/jobs", json={"task": "greet", "args": ["x"]}),
                               client.get("/api/v1/jobs")):
                    code = answer.json()["error"]["code"] if answer.status_code >= 400 else "ok"
                    seen[f"{answer.status_code} {code}"] += 1
                time.sleep(0.02)

        callers = [threading.Thread(target=call) for _ in range(3)]
        for caller in callers:
            caller.start()
        wait_for(lambda: seen["201 ok"] > 0, timeout=30, what="jobs made before the outage")
        cluster.stop()
        time.sleep(OUTAGE_S)  # the outage's length: the scenario, not a wait for something
        cluster.start()
        made_before = seen["201 ok"]
        wait_for(lambda: seen["201 ok"] > made_before, timeout=30, what="a job made after the outage")
        stop.set()
        for caller in callers:
            caller.join(30)
        after = as_("alice", url).post("/api/v1/jobs", json={"task": "greet", "args": ["after"]})
    app.close()
    record(f"HTTP API, PostgreSQL down {OUTAGE_S} s", "answers by status and code", dict(seen))
    assert set(seen) <= {"201 ok", "200 ok", "503 STORE_UNAVAILABLE"}, seen
    assert seen["503 STORE_UNAVAILABLE"] > 0 and seen["201 ok"] > 0
    assert after.status_code == 201
