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


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("login failed password=hunter2 for ana", "hunter2"),
        ('config {"password": "x-secret", "user": "ana"}', "x-secret"),
        ("api_key: abc123def", "abc123def"),
        ("GET https://api.example.com/v1/send?api_key=k3y&to=1", "k3y"),
        ("GET https://storage.example.com/f.pdf?X-Amz-Signature=f00ba4&sig=b4r", "f00ba4"),
        ("GET https://storage.example.com/f.pdf?sig=b4rb4z", "b4rb4z"),
        ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("slack xoxb-2048-4096-AbCdEfGhIjKl", "xoxb-2048"),
        ("hook https://hooks.slack.com/services/T000/B000/XXXXXXXX", "T000/B000"),
        ("openai sk-proj-Abcdefghijklmnopqrstuvwx0123", "sk-proj-Abc"),
        ("anthropic sk-ant-api03-Abcdefghijklmnopqrstuvwx", "sk-ant-api03"),
        ("google AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA123"),
        ("sendgrid SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ", "SG.abcdef"),
        ("twilio SK0123456789abcdef0123456789abcdef", "SK0123456789"),
        ("gitlab glpat-abcdefghijklmnopqrst", "glpat-abc"),
        ("pay to GB82 WEST 1234 5698 7654 32 today", "5698 7654"),
        ("pay to DE89370400440532013000", "DE89370400440532013000"),
    ],
)
def test_secrets_in_free_text_and_provider_keys_are_redacted(text: str, secret: str) -> None:
    assert secret not in redact_text(text)


def test_ordinary_words_and_numbers_survive() -> None:
    for text in ("the token expired", "passwords must match", "order DE12 is late", "see issue 1234567"):
        assert redact_text(text) == text


def test_a_long_message_is_redacted_before_it_is_cut() -> None:
    from redrive.core.classify import one_line

    pem = "-----BEGIN RSA PRIVATE KEY-----\n" + "MIIEpAIBAAKCAQEA" * 80 + "\n-----END RSA PRIVATE KEY-----"
    assert "MIIEpAIBAAKCAQEA" not in one_line(f"could not sign: {pem}")  # the cut would lose its END line
    straddling = "x" * 495 + " AKIAIOSFODNN7EXAMPLE"  # a key across character 500
    assert "AKIAIOS" not in one_line(straddling)
    assert "MIIE" not in redact_text("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg")  # cut short already


@pytest.mark.parametrize(
    ("text", "secret", "marker"),
    [
        ('"GET /api/v1/jobs?idempotency_key=welcome.user%40example.org HTTP/1.1" 200', "welcome.user",
         "[EMAIL]"),
        ('"GET /api/v1/jobs?task=password%3Dhunter2 HTTP/1.1" 200', "hunter2", "password=[REDACTED]"),
        ("next: /jobs?owner=ada%2Blist%40example.com&limit=50", "ada", "[EMAIL]"),
    ],
)
def test_a_percent_encoded_secret_is_redacted_in_its_decoded_form(text: str, secret: str, marker: str) -> None:
    # As an HTTP client sends a query (httpx encodes @ as %40): the access log must not show it either
    cleaned = redact_text(text)
    assert secret not in cleaned and marker in cleaned


def test_percent_signs_without_a_secret_are_left_as_written() -> None:
    for text in ("progress 50% done", "GET /api/v1/jobs?task=send%20report HTTP/1.1", "%zz and %4"):
        assert redact_text(text) == text
