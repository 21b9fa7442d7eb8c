from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redrive.core.redact import REDACTED, redact, redact_text

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabc\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(
    ("text", "secret", "marker"),
    [
        ("Authorization: Bearer abc.DEF-123_x", "abc.DEF-123_x", "Bearer [REDACTED]"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX2hlcmU here",
         "eyJhbGciOiJIUzI1NiJ9", "[JWT]"),
        ("key AKIAIOSFODNN7EXAMPLE used", "AKIAIOSFODNN7EXAMPLE", "[AWS_KEY]"),
        ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghij", "[GITHUB_TOKEN]"),
        ("stripe sk_live_51HabcdefGHIJKLmnop", "sk_live_51Habcdef", "[STRIPE_KEY]"),
        ("card 4111 1111 1111 1111 declined", "4111 1111 1111 1111", "[CARD]"),
        ("card 4111111111111111", "4111111111111111", "[CARD]"),
        ("mail ada@example.com failed", "ada@example.com", "[EMAIL]"),
        ("dsn postgresql://app:s3cr3t@db:5432/x", "s3cr3t", "postgresql://[CREDENTIALS]@"),
        (f"key {PEM} end", "MIIEowIBAAKCAQEA7", "[PEM]"),
    ],
)
def test_value_patterns_are_redacted(text: str, secret: str, marker: str) -> None:
    cleaned = redact_text(text)
    assert secret not in cleaned and marker in cleaned


def test_order_numbers_that_fail_luhn_survive() -> None:
    assert redact_text("order 1234567890123456 shipped") == "order 1234567890123456 shipped"


def test_denylisted_keys_are_redacted_at_any_depth_and_the_original_is_untouched() -> None:
    context = {
        "request_id": "req-42",
        "headers": {"Authorization": "Basic Zm9vOmJhcg==", "Cookie": "sid=1", "Accept": "json"},
        "config": [{"api_key": "xyz", "password": "hunter2", "client_secret": "s"}],
        "upstream_status": 503,
        "note": "user bob@example.com",
        "token": None,
    }
    original = copy.deepcopy(context)
    cleaned = redact(context)
    assert context == original
    assert cleaned["request_id"] == "req-42" and cleaned["upstream_status"] == 503
    assert cleaned["headers"] == {"Authorization": REDACTED, "Cookie": REDACTED, "Accept": "json"}
    assert cleaned["config"] == [{"api_key": REDACTED, "password": REDACTED, "client_secret": REDACTED}]
    assert cleaned["note"] == "user [EMAIL]"
    assert cleaned["token"] is None


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
))
def test_redaction_is_idempotent_and_keeps_the_shape(value) -> None:
    once = redact(value)
    assert redact(once) == once
    assert type(once) is type(value) or isinstance(value, tuple)
