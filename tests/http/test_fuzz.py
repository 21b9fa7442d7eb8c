"""Fuzzing the API from its own OpenAPI document (schemathesis), bounded:
whatever a client sends to any operation, as an owner or an operator, on
SQLite and on PostgreSQL, each holding one of everything (tests/http/populated.py),
no answer is a 5xx, and every answer is a status the operation declares, JSON,
and valid against that status's schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    FailureGroup,
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from redrive.http import TokenAuth, create_api
from redrive.http.auth import parse_tokens
from tests.figures import record
from tests.http.conftest import SPECS, TOKENS
from tests.http.populated import make_app, populate

EXAMPLES = 25  # per operation
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(params=["sqlite", "postgres"])
def fuzzed(request, tmp_path) -> Iterator[Any]:
    """The API on either store, full: what one store refuses, the other must too."""
    url = f"sqlite:///{tmp_path / 'fuzz.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    app = make_app(url)
    populate(app)
    yield create_api(app, auth=TokenAuth(parse_tokens(SPECS)))
    app.close()


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_no_request_gets_a_server_error(fuzzed) -> None:
    api = fuzzed
    schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", api)  # called in this process
    calls, errors, nonconforming = 0, [], []
    for found in schema.get_all_operations():
        operation = found.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def fuzz(case) -> None:
            nonlocal calls
            for who in ("alice", "operator"):
                response = case.call(headers={"Authorization": f"Bearer {TOKENS[who]}"})
                calls += 1
                if response.status_code >= 500:
                    errors.append((who, case.method, case.formatted_path, response.status_code, response.text))
                try:
                    case.validate_response(response, checks=CHECKS)
                except FailureGroup as failed:  # the checks that failed
                    nonconforming.append((who, case.method, case.formatted_path, response.status_code,
                                          str(failed)[:300]))

        fuzz()
    record("HTTP API fuzzed from its OpenAPI document", "requests", calls)
    record("HTTP API fuzzed from its OpenAPI document", "5xx answers", len(errors), "0")
    record("HTTP API fuzzed from its OpenAPI document", "answers not matching the document",
           len(nonconforming), "0")
    assert not errors, errors[:5]
    assert not nonconforming, nonconforming[:5]
