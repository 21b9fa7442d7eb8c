"""The API of an app of our own, called in this process (most tests) or
served by a real uvicorn server on 127.0.0.1 (where the socket is the point)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.testclient import TestClient

from redrive import App
from redrive.http import TokenAuth, create_api
from redrive.http.auth import parse_tokens
from redrive.testing import wait_for

TOKENS = {
    "operator": "op-0123456789abcdef",
    "alice": "alice-0123456789abcdef",
    "bob": "bob-0123456789abcdef",
    "carol": "carol-0123456789abcdef",
    "viewer": "viewer-0123456789abcdef",
}
SPECS = ([f"{TOKENS['operator']}=operator:ops", f"{TOKENS['viewer']}=viewer:vic"]
         + [f"{TOKENS[o]}=owner:{o}" for o in ("alice", "bob", "carol")])


@contextmanager
def serving(asgi: Any) -> Iterator[str]:
    server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=0, log_config=None, access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), timeout=20, what="the server starting")
    assert server.started, "the server did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def make_app(url: str) -> App:
    from redrive import Dependency

    app = App(url, dependencies=[Dependency("mailer")])

    @app.task
    def greet(name: str) -> str:
        return f"hello {name}"

    @app.task
    def fail(reason: str) -> None:
        from redrive import Permanent

        raise Permanent(reason)

    app.schedule("digest", "greet", "0 9 * * *", timezones=["Europe/Paris", "America/New_York"],
                 kwargs={"name": "digest"})
    return app


@pytest.fixture
def api_app(tmp_path) -> Iterator[App]:
    app = make_app(f"sqlite:///{tmp_path / 'redrive.db'}")
    yield app
    app.close()


@pytest.fixture
def api(api_app: App) -> Any:
    """The API on ``api_app``, called in this process: these tests are about
    what it answers, not about the socket. A real server stays where it is
    the point: the body limit (test_api), the outage (test_outage),
    ``redrive serve`` (test_serve) and the browser's tests."""
    return create_api(api_app, auth=TokenAuth(parse_tokens(SPECS)))


_OPEN: list[httpx.Client | TestClient] = []
IN_PROCESS = "http://testserver"  # the address an in-process client calls, and its Origin


def as_(who: str | None, target: Any, *, token: str | None = None) -> httpx.Client | TestClient:
    """A client calling ``target`` as ``who`` (None: no token), closed after
    the test. ``target`` is an ASGI app, called in this process (Starlette's
    TestClient: the same requests, no socket), or the URL of a served one."""
    token = token or (TOKENS[who] if who else None)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if isinstance(target, str):
        client = httpx.Client(base_url=target, headers=headers, timeout=30)
    else:
        # As a server would: an error in the app is a 500 answer, and a
        # redirect is an answer the test reads, not one followed for it.
        client = TestClient(target, base_url=IN_PROCESS, headers=headers, raise_server_exceptions=False,
                            follow_redirects=False)
    _OPEN.append(client)
    return client


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


class Conformance:
    """Checks answers against the served OpenAPI document: the status and
    content type are ones the operation declares, and a JSON body validates
    against that status's schema. Every object schema in the document must be closed
    (``additionalProperties: false``), so a field no schema names fails."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.open_schemas = sorted(
            name for name, schema in spec["components"]["schemas"].items()
            if "properties" in schema and schema.get("additionalProperties") is not False)

    def problem(self, method: str, template: str, answer: httpx.Response) -> str | None:
        import jsonschema_rs

        declared = self.spec["paths"][template][method.lower()]["responses"]
        found = declared.get(str(answer.status_code))
        if found is None:
            return f"status {answer.status_code} is not declared"
        media = answer.headers.get("content-type", "").split(";")[0].strip()
        content = found.get("content", {})
        if answer.status_code == 204 and not content:  # no content, as declared
            return "a 204 with a body" if answer.content else None
        if media not in content:
            return f"{media} is not a declared content type of status {answer.status_code}"
        schema = content[media].get("schema")
        if media != "application/json" or schema is None:
            return None
        validator = jsonschema_rs.validator_for({**schema, "components": self.spec["components"]})
        errors = [f"{e.instance_path}: {e.message}" for e in validator.iter_errors(answer.json())]
        return "; ".join(errors[:3]) or None
