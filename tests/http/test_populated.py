"""Every read route of the API and every page of the dashboard, against a
database with one of everything in it (populated.py), on SQLite and on
PostgreSQL, through the real app: each answer is 2xx, and each API answer
validates against the app's own OpenAPI document. A route added without a
call here fails the coverage check. (An empty database hid a 500 on
``GET /api/v1/workers`` once: its view had fields its model lacked.)"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fastapi.routing import APIRoute
from schemathesis.checks import content_type_conformance, response_schema_conformance, status_code_conformance

from redrive.http import TokenAuth, create_api
from redrive.http.auth import parse_tokens
from tests.conftest import _fresh_database
from tests.figures import record
from tests.http.conftest import IN_PROCESS, SPECS, TOKENS, as_
from tests.http.populated import CHILDREN, SUPERVISOR, WORKER, Populated, make_app, populate

CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]
STATUSES = ("pending", "blocked", "scheduled", "queued", "running", "succeeded", "failed", "cancelled")
LETTER_STATES = ("open", "replayed", "resolved", "escalated")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def populated(request, tmp_path_factory) -> Iterator[tuple[Any, Populated]]:
    """The API over one populated database per store, for the whole module:
    these tests only read."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('populated') / 'redrive.db'}"
        yield from _served(url)
    else:
        database = _fresh_database(request.getfixturevalue("pg_template"))
        try:
            yield from _served(next(database))
        finally:
            next(database, None)  # retired


def _served(url: str) -> Iterator[tuple[Any, Populated]]:
    app = make_app(url)
    try:
        made = populate(app)
        yield create_api(app, auth=TokenAuth(parse_tokens(SPECS))), made
    finally:
        app.close()


def _api_calls(made: Populated) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(who, path template, path parameters, query) for every read of the API."""
    calls: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = []
    for who in ("operator", "alice", "viewer"):
        calls.append((who, "/api/v1/jobs", {}, {}))
        calls += [(who, "/api/v1/jobs", {}, {"status": s}) for s in STATUSES]
    calls += [("operator", "/api/v1/jobs", {}, {"owner": "alice", "limit": 2}),
              ("operator", "/api/v1/jobs", {}, {"queue": "bulk", "limit": 1000})]
    calls += [("operator", "/api/v1/jobs/{job_id}", {"job_id": str(j)}, {}) for j in made.jobs.values()]
    calls += [("alice", "/api/v1/jobs/{job_id}", {"job_id": str(made.jobs[label])}, {})
              for label in ("alice's queued", "alice's running")]
    calls += [("operator", "/api/v1/dead-letters", {}, {}), ("operator", "/api/v1/dead-letters/facets", {}, {})]
    calls += [("operator", "/api/v1/dead-letters", {}, {"state": s}) for s in LETTER_STATES]
    calls += [("operator", "/api/v1/dead-letters/facets", {}, {"state": s}) for s in LETTER_STATES]
    calls += [("operator", "/api/v1/dead-letters/{letter_id}", {"letter_id": i}, {}) for i in made.letters.values()]
    calls += [("operator", "/api/v1/breakers", {}, {})]
    calls += [("operator", "/api/v1/breakers/{name}", {"name": n}, {}) for n in made.breakers]
    calls += [("operator", "/api/v1/queues", {}, {}), ("operator", "/api/v1/queues/throughput", {}, {}),
              ("operator", "/api/v1/queues/throughput", {}, {"minutes": 1440})]
    calls += [("operator", "/api/v1/charts", {}, {"window": w, "by": b}) for w in ("1h", "24h", "7d")
              for b in ("queue", "task")]
    calls += [("operator", path, {}, {}) for path in ("/api/v1/audit", "/api/v1/workers", "/api/v1/schedules")]
    calls += [("operator", "/api/v1/outbox", {}, {}), ("operator", "/api/v1/outbox", {}, {"status": "failed"})]
    calls += [("viewer", path, {}, {}) for path in ("/api/v1/queues", "/api/v1/workers", "/api/v1/schedules")]
    calls += [(who, "/api/v1/workflows", {}, {}) for who in ("operator", "alice", "viewer")]
    calls += [(who, "/api/v1/workflows/{workflow_id}", {"workflow_id": str(w)}, {})
              for w in made.workflows.values() for who in ("operator", "alice")]
    return calls


def test_every_read_route_of_the_api_answers_a_full_database_as_its_document_says(populated) -> None:
    api, made = populated
    schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", api)
    operations = {(op.method.upper(), op.path): op for op in (found.ok() for found in schema.get_all_operations())}
    reads = {path for method, path in operations if method == "GET" and path.startswith("/api/v1/")}
    called, answers = set(), 0
    for who, path, parameters, query in _api_calls(made):
        case = operations["GET", path].Case(path_parameters=parameters, query=query,
                                            headers={"Authorization": f"Bearer {TOKENS[who]}"})
        response = case.call()
        assert 200 <= response.status_code < 300, (who, case.formatted_path, query, response.text[:500])
        case.validate_response(response, checks=CHECKS)
        called.add(path)
        answers += 1
    assert called == reads, f"read routes never called against a full database: {sorted(reads - called)}"
    record("read routes against a full database", "API answers validated against the OpenAPI document",
           answers, "all 2xx")


def test_what_the_api_shows_of_the_full_database(populated) -> None:
    """The routes answer what was made, not merely something valid."""
    api, _ = populated
    ops = as_("operator", api)
    workers = {w["id"]: w for w in ops.get("/api/v1/workers").json()["items"]}
    assert workers[WORKER]["kind"] == "worker" and workers[WORKER]["jobs_run"] == 12
    supervisor = workers[SUPERVISOR]
    assert (supervisor["kind"], supervisor["children"], supervisor["restarts"]) == ("supervisor", 2, 3)
    assert supervisor["restarts_by"] == {"hard_time_limit": 1, "recycled": 1, "died": 1}
    assert supervisor["replaced"][0]["reason"] == "recycled"
    assert [workers[c]["orphaned"] for c in CHILDREN] == [0, 1]
    assert all(workers[c]["supervisor"] == SUPERVISOR for c in CHILDREN)
    breakers = {b["name"]: b["state"] for b in ops.get("/api/v1/breakers").json()["items"]}
    assert breakers == {"mailer": "closed", "converter": "open", "gateway": "half_open"}
    letters = {d["state"] for d in ops.get("/api/v1/dead-letters").json()["items"]}
    assert letters == set(LETTER_STATES)
    queues = {q["queue"]: q for q in ops.get("/api/v1/queues").json()["items"]}
    assert queues["bulk"]["counts"]["queued"] >= 3000 and queues["paused"]["paused"]
    schedules = {s["name"]: s for s in ops.get("/api/v1/schedules").json()["items"]}
    assert schedules["weekly"]["paused_by"] == "ops" and schedules["retired"]["task"] is None
    assert len(schedules["digest"]["zones"]) == 2
    assert {row["status"] for row in ops.get("/api/v1/outbox").json()["items"]} == {"sent", "failed"}
    assert [s for s in STATUSES if not ops.get("/api/v1/jobs", params={"status": s}).json()["items"]] == []


def _pages(made: Populated) -> list[tuple[str, str]]:
    """(route, address) for every page of the dashboard."""
    pages = [("/login", "/login"), ("/", "/"), ("/_banner", "/_banner"), ("/_counts", "/_counts"),
             ("/jobs", "/jobs"), ("/jobs", "/jobs?limit=1000&queue=bulk"), ("/dead-letters", "/dead-letters"),
             ("/breakers", "/breakers"), ("/schedules", "/schedules"), ("/outbox", "/outbox"),
             ("/outbox", "/outbox?status=failed")]
    pages += [("/jobs", f"/jobs?status={s}") for s in STATUSES]
    pages += [("/jobs/{job_id}", f"/jobs/{j}") for j in made.jobs.values()]
    pages += [("/dead-letters", f"/dead-letters?state={s}") for s in LETTER_STATES]
    pages += [("/dead-letters/{letter_id}", f"/dead-letters/{i}") for i in made.letters.values()]
    pages += [("/charts", f"/charts?window={w}&by={b}") for w in ("1h", "24h", "7d") for b in ("queue", "task")]
    pages += [("/workflows", "/workflows")]
    pages += [("/workflows/{workflow_id}", f"/workflows/{w}") for w in made.workflows.values()]
    return pages


def _get_routes(api: Any) -> set[str]:
    """The path of every GET route the app serves, its included routers' too."""
    found = set()
    for route in api.routes:
        router = getattr(route, "original_router", None)  # (newer FastAPI keeps included routers whole)
        if router is not None:
            found |= _get_routes(router)
        elif isinstance(route, APIRoute) and "GET" in route.methods:
            found.add(route.path)
    return found


def test_every_page_of_the_dashboard_answers_a_full_database(populated) -> None:
    api, made = populated
    client = as_(None, api)
    client.headers["Origin"] = IN_PROCESS
    assert client.post("/login", data={"token": TOKENS["operator"]}).status_code == 303
    routes = {path for path in _get_routes(api) if not path.startswith(("/api/", "/metrics", "/healthz", "/readyz"))}
    called = set()
    for route, address in _pages(made):
        page = client.get(address)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), (address, page.text[:500])
        assert not re.search(r"/(?:work|home|usr|tmp)/\S+\.py", page.text), address  # no server path
        called.add(route)
    assert called == routes, f"pages never opened against a full database: {sorted(routes - called)}"
    overview = client.get("/").text
    for shown in (SUPERVISOR, WORKER, "bulk", "paused"):
        assert shown in overview, shown
    alice = as_(None, api)
    alice.headers["Origin"] = IN_PROCESS
    assert alice.post("/login", data={"token": TOKENS["alice"]}).status_code == 303
    for label in ("alice's queued", "alice's running"):
        assert alice.get(f"/jobs/{made.jobs[label]}").status_code == 200
    assert alice.get("/jobs").status_code == 200
