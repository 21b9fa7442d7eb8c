"""The converter's own rules, without processes: retry spacing, retryability
by code, the gateway's statuses and errors as codes, the knobs' checks."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from converter.codes import CLASSIFIER, NAMES, TAXONOMY, message, public
from converter.settings import Settings
from converter.tasks import make_app

from redrive import ConfigError

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def test_the_backoff_is_base_times_two_to_the_n_plus_up_to_the_jitter(tmp_path) -> None:
    app = make_app(Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}"))
    backoff = app.registry.task("convert").backoff
    rng = random.Random(7)
    for attempt in (1, 2, 3):
        base = 5.0 * 2 ** (attempt - 1)  # the design's n starts at 0
        delays = [backoff.delay(attempt, rng=rng) for _ in range(200)]
        assert all(timedelta(seconds=base) <= d <= timedelta(seconds=base + 5) for d in delays)
        assert max(delays) - min(delays) > timedelta(seconds=3)  # the jitter spreads them
    assert app.registry.task("convert").max_attempts == 3
    app.close()


def test_which_codes_are_retried() -> None:
    retried = {c.name for c in TAXONOMY if c.retryable} & {"GW_5XX", "GW_TIMEOUT", "IO_ERROR", "GW_4XX", "NOT_PDF",
                                                            "TOO_LARGE", "UNKNOWN"}
    assert retried == {"GW_5XX", "GW_TIMEOUT", "IO_ERROR"}


@pytest.mark.parametrize(("status", "code"), [(400, "GW_4XX"), (406, "GW_4XX"), (413, "GW_4XX"), (415, "GW_4XX"),
                                              (500, "GW_5XX"), (502, "GW_5XX"), (503, "GW_5XX"), (504, "GW_5XX")])
def test_gateway_statuses_are_the_designs_codes(status: int, code: str) -> None:
    request = httpx.Request("POST", "http://gateway/convert")
    error = httpx.HTTPStatusError("x", request=request, response=httpx.Response(status, request=request))
    assert CLASSIFIER.exception(error, now=NOW).code == code


def test_network_errors_and_timeouts_are_retried_codes() -> None:
    request = httpx.Request("POST", "http://gateway/convert")
    assert CLASSIFIER.exception(httpx.ConnectError("refused", request=request), now=NOW).code == "GW_5XX"
    assert CLASSIFIER.exception(httpx.ReadTimeout("slow", request=request), now=NOW).code == "GW_TIMEOUT"
    assert CLASSIFIER.exception(ValueError("a bug"), now=NOW).code == "UNKNOWN"


THE_TEN = {"NOT_PDF", "TOO_LARGE", "GW_4XX", "GW_5XX", "GW_TIMEOUT", "IO_ERROR", "NOT_READY", "EXPIRED", "FORBIDDEN",
           "UNKNOWN"}


def test_the_codes_are_the_designs_ten_and_every_answer_uses_one() -> None:
    """The design: "use these codes across API responses, job records, logs,
    and UI copy"; a nuance of the service's own maps to one of them."""
    import re
    from pathlib import Path

    import converter.web

    assert NAMES == THE_TEN
    answered = set(re.findall(r'\berror\("([A-Z_0-9]+)"', Path(converter.web.__file__).read_text()))
    assert answered and answered <= THE_TEN, answered - THE_TEN


def test_internal_codes_show_as_public_ones_with_their_messages() -> None:
    assert (public("GW_UNAVAILABLE"), public("INVALID_MAPPING"), public("LEASE_EXPIRED")) == ("GW_5XX", "GW_4XX",
                                                                                              "UNKNOWN")
    assert message("GW_TIMEOUT") == "Conversion is taking too long. We’ll retry."


@pytest.mark.parametrize(("env", "says"), [({"RETRY_MAX_ATTEMPTS": "three"}, "RETRY_MAX_ATTEMPTS must be a whole"),
                                           ({"RETRY_MAX_ATTEMPTS": "0"}, "at least 1"),
                                           ({"CIRCUIT_FAIL_THRESHOLD": "150"}, "percentage"),
                                           ({"CIRCUIT_MODE": "open"}, "hold or fail_fast"),
                                           ({"RETENTION_HOURS": "-1"}, "above 0")])
def test_a_bad_knob_is_a_one_line_error(env: dict, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        Settings.from_env(env)


def test_every_knob_of_the_design_is_read_from_the_environment() -> None:
    knobs = {"RETRY_MAX_ATTEMPTS": "4", "RETRY_BASE_DELAY_MS": "100", "RETRY_JITTER_MAX_MS": "50",
             "WORKER_LEASE_TTL_SEC": "9", "GATEWAY_TIMEOUT_MS": "700", "WORKER_CONCURRENCY": "2",
             "CIRCUIT_WINDOW": "8", "CIRCUIT_FAIL_THRESHOLD": "30", "CIRCUIT_COOLDOWN_MS": "900",
             "DATABASE_URL": "sqlite:///x.db", "GATEWAY_URL": "http://gw", "UPLOADS_DIR": "u", "RESULTS_DIR": "r"}
    made = Settings.from_env(knobs)
    assert {name.upper(): str(getattr(made, name.lower())) for name in knobs} == knobs


def test_the_breaker_opens_at_its_threshold_and_closes_after_the_probe_and_a_trial(tmp_path) -> None:
    from redrive.core.breaker import Breaker, Call, State, admit, probe_passed, record

    app = make_app(Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}"))  # 50 % of the last 20, at least 10
    gateway = app.registry.dependencies["gateway"]
    policy = gateway.policy
    assert (policy.failure_rate, policy.window_calls, policy.wait) == (50, 20, timedelta(seconds=30))
    assert gateway.mode.value == "hold" and gateway.probe is not None
    b = record(Breaker(), policy, [Call(0.0, ok=False)] * 9, 0.0)
    assert b.state is State.CLOSED  # nine calls: too few to judge
    b = record(Breaker(), policy, [Call(0.0, ok=True)] * 10 + [Call(1.0, ok=False)] * 9, 1.0)
    assert b.state is State.CLOSED  # 9 of 19 failed: under half
    b = record(b, policy, [Call(2.0, ok=False)], 2.0)
    assert b.state is State.OPEN  # 10 of the last 20: half
    assert admit(b, policy, 40.0, probe_decides=True)[0] is False  # with a probe, only the probe reopens it
    b = probe_passed(b, 40.0)
    allowed, b = admit(b, policy, 40.0, probe_decides=True)
    assert allowed and b.state is State.HALF_OPEN
    assert record(b, policy, [Call(41.0, ok=True)], 41.0).state is State.CLOSED
    app.close()


def test_retention_takes_part_of_an_hour() -> None:
    assert Settings.from_env({"RETENTION_HOURS": "0.5"}).retention_hours == 0.5
