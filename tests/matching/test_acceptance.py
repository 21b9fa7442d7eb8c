"""The matching worker's design, checked against the running example: the
§2 classification table row by row, the two retry levels, three deliveries
then ``failed`` with both admin channels told, the atomic write phase, and a
worker SIGKILLed mid-document (the stuck-document alarm fires, nothing is
lost)."""

from __future__ import annotations

import itertools

from redrive import Actor
from redrive.testing import wait_for
from tests.examples import BOTH_STORES, refusing_port
from tests.matching.conftest import Matching

# (row of the table, what the provider answers first, transient?, the code recorded)
TABLE = [
    ("HTTP 429 (rate limit)", ["429"], True, "RATE_LIMITED"),
    ("HTTP 5xx (500)", ["500"], True, "UPSTREAM_5XX"),
    ("HTTP 5xx (503)", ["503"], True, "UPSTREAM_5XX"),
    ("network timeout", ["timeout"], True, "NETWORK_TIMEOUT"),
    ("response parse failure", ["garbage"], True, "RESPONSE_INVALID"),
    ("response schema validation failure", ["schema"], True, "RESPONSE_INVALID"),
    ("HTTP 400 context-window exceeded", ["context"], False, "CONTEXT_TOO_LONG"),
    ("HTTP 401", ["401"], False, "AUTH_DENIED"),
    ("HTTP 403", ["403"], False, "AUTH_DENIED"),
    ("two transient failures in one delivery", ["500", "429"], True, "UPSTREAM_5XX"),
]


def _pair(matching: Matching, n: int, tenant: str = "acme") -> tuple[str, str]:
    """A first document (matched alone: no candidates, no LLM call) and the
    id of a second one that shares its reference, so its match needs the LLM."""
    first = f"doc-{n}-a"
    matching.submit(first, tenant, f"Supplier {n} GmbH", f"Invoice INV-{1000 + n} for services")
    return first, f"doc-{n}-b"


def test_each_row_of_the_classification_table(matching: Matching) -> None:
    matching.provider()
    matching.worker()
    pairs = [_pair(matching, n) for n in range(len(TABLE))]
    for first, _ in pairs:
        matching.wait_status(first, "succeeded")
    for (_, answers, transient, _), (_, second) in zip(TABLE, pairs, strict=True):
        if transient:
            matching.script(second, *answers)  # then the right answer
        else:
            matching.script(second, always=answers[0])
    for n, (_, second) in enumerate(pairs):
        matching.submit(second, "acme", f"SUPPLIER {n} gmbh.", f"Payment for inv-{1000 + n}")
    admin = matching.app.admin(Actor.operator("test"))
    for (row, answers, transient, code), (first, second) in zip(TABLE, pairs, strict=True):
        doc = matching.wait_status(second, "succeeded", "failed")
        calls = matching.calls(second)
        assert doc["matching_attempts"] == 1, row  # in-process tries are not deliveries
        if transient:
            assert doc["matching_status"] == "succeeded", row
            assert len(calls) == len(answers) + 1, (row, calls)  # retried in process until the right answer
            assert matching.edges(second) == {(first, second)}, row
            assert doc["cluster_id"] == first == matching.document(first)["cluster_id"], row
        else:
            assert doc["matching_status"] == "failed", row
            assert len(calls) == 1, (row, calls)  # not retried at all
            assert doc["matching_failed_at"] is not None and doc["matching_error"], row
            assert matching.edges(second) == set(), row  # no silent "no matches"
            letters = [x for x in admin.dead_letters(task="match_document") if x.error_code == code]
            assert letters and all(x.attempts == 1 for x in letters), row
            if answers == ["context"]:  # why, in the provider's words: the code, never its free text
                assert "context_length_exceeded" in doc["matching_error"], doc["matching_error"]
                assert any("context_length_exceeded" in x.error_message for x in letters)
                wait_for(lambda second=second: any(f"Document: {second}" in m and "context_length_exceeded" in m
                                     for m in matching.slack.messages), timeout=30, what="the admins told why")


def test_a_document_failing_transiently_is_delivered_three_times_then_failed_and_admins_told(
        matching: Matching) -> None:
    matching.provider()
    matching.worker()
    first, second = _pair(matching, 1, tenant="globex")
    matching.wait_status(first, "succeeded")
    matching.script(second, always="garbage")  # never a decision: never "succeeded with no matches"
    matching.submit(second, "globex", "Supplier 1", "Credit note for INV-1001")
    doc = matching.wait_status(second, "failed", timeout=90)
    assert doc["matching_attempts"] == 3
    assert doc["matching_error"].startswith("JSONDecodeError")
    assert doc["matching_failed_at"] is not None
    times = [c["at"] for c in matching.calls(second)]
    assert len(times) == 9  # 3 deliveries × 3 in-process tries
    deliveries = [times[0:3], times[3:6], times[6:9]]
    assert deliveries[1][0] - deliveries[0][-1] >= 1.0  # REDELIVERY_DELAYS_S: 1 s (the design's 5 min) ...
    assert deliveries[2][0] - deliveries[1][-1] >= 2.0  # ... then 2 s (30 min)
    assert all(b - a < 1.0 for group in deliveries for a, b in itertools.pairwise(group))
    letter, = matching.app.admin(Actor.operator("test")).dead_letters(task="match_document")
    assert letter.attempts == 3 and letter.error_code == "RESPONSE_INVALID"

    wait_for(lambda: matching.slack.messages and matching.inbox.messages, timeout=30, what="both admin notifications")
    expected = ["Document: doc-1-b", "Tenant: globex", "Error: JSONDecodeError", "Attempts: 3",
                "https://admin.example.com/documents/doc-1-b"]
    slack, = matching.slack.messages
    mail, = matching.inbox.messages
    assert "Matching failed for document doc-1-b" in slack and mail["Subject"] == "Matching failed for document doc-1-b"
    body = mail.get_payload(decode=True).decode()
    for part in expected:
        assert part in slack and part in body, part


def test_a_refused_connection_is_transient(matching: Matching) -> None:
    """The provider is not listening at first: the delivery's tries are
    refused, the document waits as ``pending`` and its next delivery, once
    the provider is up, succeeds."""
    with refusing_port() as port:
        matching.env["LLM_URL"] = f"http://127.0.0.1:{port}"
        matching.worker()
        first, second = _pair(matching, 2)
        matching.wait_status(first, "succeeded")
        matching.submit(second, "acme", "Supplier 2", "Reminder about INV-1002")
        wait_for(lambda: matching.document(second)["matching_error"], timeout=30, what="the refused delivery")
        waiting = matching.document(second)
        assert waiting["matching_status"] == "pending" and "ConnectError" in waiting["matching_error"]
        matching.provider(port)
    doc = matching.wait_status(second, "succeeded")
    assert doc["matching_attempts"] == 2
    assert matching.edges(second) == {(first, second)}


def _fail_inserts_of(matching: Matching, document: str) -> None:
    """A real database failure inside the write phase: a trigger refusing
    any new match edge of ``document``, after its old edges were deleted."""
    if matching.db.sqlite:
        matching.db.run(f"CREATE TRIGGER refuse BEFORE INSERT ON document_match WHEN NEW.document_a_id = "
                        f"'{document}' OR NEW.document_b_id = '{document}' BEGIN SELECT RAISE(ABORT, 'refused'); END")
    else:
        matching.db.run("CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$ "
                        "LANGUAGE plpgsql")
        matching.db.run(f"CREATE TRIGGER refuse BEFORE INSERT ON document_match FOR EACH ROW WHEN "
                        f"(NEW.document_a_id = '{document}' OR NEW.document_b_id = '{document}') "
                        f"EXECUTE FUNCTION refuse()")


@BOTH_STORES
def test_a_failure_inside_the_write_phase_leaves_the_previous_matches_intact(matching: Matching) -> None:
    matching.provider()
    matching.worker()
    first, second = _pair(matching, 3)
    matching.wait_status(first, "succeeded")
    matching.submit(second, "acme", "Supplier 3", "Delivery note for INV-1003")
    matching.wait_status(second, "succeeded")
    before = matching.edges(second), matching.document(first)["cluster_id"], matching.document(second)["cluster_id"]
    assert before == ({(first, second)}, first, first)

    _fail_inserts_of(matching, second)
    matching.submit(second, "acme", "Supplier 3", "Corrected delivery note for INV-1003")  # a new revision
    doc = matching.wait_status(second, "failed")
    assert "refused" in doc["matching_error"]
    assert len(matching.calls(second)) == 2  # the decision was made; only its writing failed
    after = matching.edges(second), matching.document(first)["cluster_id"], doc["cluster_id"]
    assert after == before


@BOTH_STORES
def test_a_worker_killed_mid_document_loses_nothing_and_the_stuck_alarm_fires(matching: Matching) -> None:
    matching.provider()
    doomed = matching.worker(WORKER_LEASE_TTL_SEC="4")
    first, second = _pair(matching, 4)
    matching.wait_status(first, "succeeded")
    matching.script(second, "slow", hang_s=60)  # the worker is inside the LLM call when it dies
    matching.submit(second, "acme", "Supplier 4", "Statement listing INV-1004")
    wait_for(lambda: matching.calls(second), timeout=30, what="the LLM call")
    matching.kill(doomed)
    assert matching.document(second)["matching_status"] == "in-progress"

    matching.worker("--alerts", STUCK_AFTER_S="1", WORKER_LEASE_TTL_SEC="4")  # looks for expired leases every 1-2 s
    wait_for(lambda: any("matching_stuck" in m for m in matching.slack.messages), timeout=30, what="the alarm")
    firing = next(m for m in matching.slack.messages if "matching_stuck" in m)
    assert "doc-4-b" in firing and "firing" in firing
    doc = matching.wait_status(second, "succeeded", timeout=60)  # redelivered once the dead worker's lease expired
    assert doc["matching_attempts"] == 2
    assert matching.edges(second) == {(first, second)}
    assert len(matching.calls(second)) == 2
    wait_for(lambda: any("matching_stuck resolved" in m for m in matching.slack.messages),
             timeout=30, what="the alarm resolving")
    assert not matching.app.admin(Actor.operator("test")).dead_letters()
