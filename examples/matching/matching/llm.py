"""The LLM match decision (the design's §2): either a valid decision,
which may rightly hold no matches, or an exception; never a silent
``{"matches": []}`` standing for a failure.

What the provider answers is classified by redrive's default classifier,
which follows the design's table: 429, 5xx, timeouts, refused connections,
unparseable and schema-invalid answers are transient; a 400 for an
exceeded context window and 401/403 are not.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from matching.settings import Settings
from redrive import Transient

PROMPT = ("You match business documents. Given a document and candidate documents of the same counterparty, "
          'answer JSON {"matches": [{"document_id": ..., "confidence": 0..1}]} listing the candidates that '
          "refer to the same transaction. An empty list is a valid answer.")


class ResponseInvalid(Transient):
    """The provider answered, but not with a decision (it may on the next try)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="RESPONSE_INVALID")


def match_decision(settings: Settings, doc: dict[str, Any], candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not candidates:
        return []  # nothing to compare with: no call, and rightly no matches
    answer = httpx.post(
        f"{settings.llm_url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {settings.llm_api_key}"},
        json={"model": settings.llm_model, "response_format": {"type": "json_object"},
              "messages": [{"role": "system", "content": PROMPT},
                           {"role": "user", "content": json.dumps({"document": doc, "candidates": candidates})}]},
        timeout=settings.llm_timeout_s,
    )
    answer.raise_for_status()  # the classifier reads the status, the body and Retry-After
    try:
        content = answer.json()["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError, ValueError):
        raise ResponseInvalid("the provider's answer has no message") from None
    decision = json.loads(content)  # not JSON: JSONDecodeError, classified RESPONSE_INVALID (transient)
    return validated(decision, {c["id"] for c in candidates})


def validated(decision: Any, candidate_ids: set[str]) -> list[dict[str, Any]]:
    """The decision's matches, or ResponseInvalid if it is not of the expected shape."""
    matches = decision.get("matches") if isinstance(decision, dict) else None
    if not isinstance(matches, list):
        raise ResponseInvalid("the decision has no list of matches")
    found = []
    for match in matches:
        if not isinstance(match, dict) or match.get("document_id") not in candidate_ids:
            raise ResponseInvalid("a match names no candidate")
        confidence = match.get("confidence")
        if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
            raise ResponseInvalid("a match has no confidence between 0 and 1")
        found.append({"document_id": match["document_id"], "confidence": float(confidence)})
    return found
