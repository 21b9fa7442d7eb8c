"""One rule for every value redrive accepts, on both stores (a property
test): whatever JSON-like value or time a caller hands over — lone
surrogates, NUL, huge and tiny numbers, deep nesting, extreme datetimes —
is either refused where it enters (a ``ConfigError`` from the library, a 422
with one of our codes from the API) with nothing stored, or stored and read
back equal through the library, the CLI, the API and the dashboard. A
worker claims beside it all along, runs every due job to an end (a task
handing the value back as its result) and never leaves a job ``running``.

And a row written before these checks (a time before year 1 in UTC, put
there in SQL) is set aside alone by the claim that meets it: failed with
``JOB_UNREADABLE``, its batch run, the lists still answering."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from redrive import App, ConfigError, Status, Worker
from redrive.core.redact import redact
from redrive.core.states import TERMINAL
from redrive.http import TokenAuth, create_api
from redrive.http.auth import parse_tokens
from redrive.testing import wait_for
from tests.e2e.cli import redrive
from tests.http.conftest import IN_PROCESS, SPECS, TOKENS, as_

EXAMPLES = 150  # per store
OUR_CODES = {"CONFIG_INVALID", "ARGS_NOT_JSON", "VALIDATION_FAILED"}

_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)  # surrogates and NUL included
_leaves = st.one_of(
    st.none(), st.booleans(), _text,
    st.sampled_from(["\ud800", "a\x00b", "\udfff\U0001f600", "é\\u0000", "\\ud800"]),
    st.integers(), st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([2**63, -(2**63) - 1, 10**30, 10**4000]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e16, 1e23, 1.7976931348623157e308, 5e-324, -0.0, 1.5e-7, 2.0**53 + 2]),
)
_values = st.recursive(_leaves, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(_text, inner, max_size=3), max_leaves=12)
_deep = st.integers(min_value=55, max_value=70).map(lambda depth: _nested(depth))
_zones = st.sampled_from([UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12))])
_times = st.one_of(
    st.none(), st.none(),
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2199, 12, 30), timezones=_zones),
    st.datetimes(timezones=_zones),
    st.sampled_from([datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
                     datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-12))),
                     datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC), datetime(2199, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)]),
)


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'values.db'}"
    return request.getfixturevalue("pg_url")


def _app(url: str) -> App:
    app = App(url)

    @app.task
    def echo(value: Any = None) -> Any:
        return value

    return app


class Checked:
    """The jobs the property stored, with what each must read back as."""

    def __init__(self, app: App, url: str) -> None:
        self.app, self.url = app, url
        self.api = create_api(app, auth=TokenAuth(parse_tokens(SPECS)))
        self.alice, self.operator = as_("alice", self.api), as_("operator", self.api)
        self.browser = as_(None, self.api)
        self.browser.headers["Origin"] = IN_PROCESS
        assert self.browser.post("/login", data={"token": TOKENS["operator"]}).status_code == 303
        self.stored: dict[str, Any] = {}  # job id -> its value
        self.refused = 0

    def count(self) -> int:
        return len(self.app.client.jobs(limit=1000).items)

    def through_library(self, value: Any, when: datetime | None) -> None:
        before = self.count()
        try:
            job = self.app.enqueue("echo", args=[value], run_at=when, owner="alice").job
        except ConfigError as refused:
            assert refused.code in OUR_CODES and "\n" not in str(refused), refused
            assert self.count() == before, "a refused enqueue stored a job"
            self.refused += 1
            return
        self.read_back(str(job.id), value, when)

    def through_api(self, value: Any, when: datetime | None) -> None:
        before = self.count()
        body = {"task": "echo", "args": [value]} | ({"run_at": when.isoformat()} if when else {})
        try:
            text = json.dumps(body)  # ensure_ascii: lone surrogates travel as escapes, as a client sends them
        except ValueError:  # a number Python will not write as JSON: no client can send it
            return
        answer = self.alice.post("/api/v1/jobs", content=text, headers={"Content-Type": "application/json"})
        if answer.status_code != 201:
            assert answer.status_code == 422, (answer.status_code, answer.text)
            assert answer.json()["error"]["code"] in OUR_CODES, answer.text
            assert self.count() == before, "a refused POST stored a job"
            self.refused += 1
            return
        self.read_back(answer.json()["id"], value, when)

    def read_back(self, job_id: str, value: Any, when: datetime | None) -> None:
        job = self.app.client.job(job_id)
        assert job.args == [value]
        if when is not None:
            assert job.run_at == when
        shown = self.alice.get(f"/api/v1/jobs/{job_id}")
        assert shown.status_code == 200, shown.text
        assert shown.json()["args"] == redact([value])
        assert self.alice.get("/api/v1/jobs?limit=5").status_code == 200
        page = self.browser.get(f"/jobs/{job_id}")
        assert page.status_code == 200, page.text[:300]
        self.stored[job_id] = value

    def by_cli(self) -> None:
        """Every stored job once through ``redrive jobs show --json``, and the lists."""
        for job_id, value in list(self.stored.items())[:15]:  # each command opens the store: a sample
            ran = redrive("jobs", "show", job_id, "--json", url=self.url)
            assert ran.returncode == 0, ran.stderr
            assert json.loads(ran.stdout)["args"] == redact([value])
        listed = redrive("jobs", "list", "--json", "--limit", "1000", url=self.url)
        assert listed.returncode == 0, listed.stderr
        assert self.browser.get("/jobs").status_code == 200
        assert self.browser.get("/").status_code == 200
        for path in ("/api/v1/jobs?limit=1000", "/api/v1/queues"):
            assert (answer := self.operator.get(path)).status_code == 200, answer.text


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_every_value_is_refused_whole_or_read_back_equal(store_url: str) -> None:
    app = _app(store_url)
    checked = Checked(app, store_url)
    worker = Worker(app.client, concurrency=4, poll_interval=timedelta(milliseconds=20),
                    shutdown_grace=timedelta(seconds=5))
    beside = threading.Thread(target=asyncio.run, args=(worker.run(),), daemon=True)
    beside.start()

    @given(value=st.one_of(_values, _deep), when=_times, api=st.booleans())
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    def property(value: Any, when: datetime | None, api: bool) -> None:
        (checked.through_api if api else checked.through_library)(value, when)

    try:
        property()
        checked.by_cli()
        now = datetime.now(UTC)
        due = [job_id for job_id in checked.stored if app.client.job(job_id).run_at <= now]
        wait_for(lambda: all(app.client.job(i).status in TERMINAL for i in due), timeout=30,
                 what="the worker ending every due job")
    finally:
        worker.stop()
        beside.join(15)
    assert checked.stored and checked.refused, "the property met only one side of the rule"
    assert not app.client.jobs(status=Status.RUNNING).items, "a job was left running"
    for job_id in due:
        job = app.client.job(job_id)
        assert (job.status, job.result) == (Status.SUCCEEDED, checked.stored[job_id]), job
    app.close()


def _write_year_zero(url: str, job_id: str) -> None:
    """What redrive no longer accepts, written in SQL as an older version or a hand would."""
    if url.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute("UPDATE redrive_job SET run_at = ? WHERE id = ?", (-62_200_000_000.0, job_id))
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE redrive_job SET run_at = '0001-01-01T00:00:00+14:00' WHERE id = %s", (job_id,))


def test_a_row_no_claim_can_use_is_set_aside_alone(store_url: str) -> None:
    app = _app(store_url)
    jobs = [app.enqueue("echo", args=[n], owner="alice").job for n in range(10)]
    bad = str(jobs[3].id)
    _write_year_zero(store_url, bad)

    api = create_api(app, auth=TokenAuth(parse_tokens(SPECS)))
    assert as_("operator", api).get("/api/v1/jobs").status_code == 200
    assert as_("alice", api).get("/api/v1/queues").status_code in (200, 403)

    claimed = app.store.jobs_claim(queues=["default"], limit=10, worker_id="w-test", lease_ttl=timedelta(seconds=30))
    assert sorted(str(j.id) for j in claimed) == sorted(str(j.id) for j in jobs if str(j.id) != bad)
    aside = app.client.job(bad)
    assert (aside.status, aside.error_code) == (Status.FAILED, "JOB_UNREADABLE")
    assert "run_at" in aside.error_message
    assert [j.status for j in app.client.jobs(status=Status.RUNNING, limit=100).items] == [Status.RUNNING] * 9
    listed = as_("operator", api).get("/api/v1/jobs?limit=100")
    assert listed.status_code == 200 and len(listed.json()["items"]) == 10
    app.close()
