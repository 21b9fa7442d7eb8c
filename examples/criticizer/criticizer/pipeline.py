"""The criticizer as a redrive pipeline: ``fetch`` the change, ask the
``llm`` for a critique, ``notify`` the channel (§8).

Each stage has its own budget of 5 attempts and its own full-jitter backoff
(§8.2, §8.3): a failing LLM spends none of fetch's or notify's attempts, and
a retry or a replay starts at the failed stage, with fetch's output saved.
A Retry-After longer than the computed delay wins, up to redrive's 5-minute
ceiling.

What reaches a dead letter (§8.4) is what redrive records, redacted, plus
the context added here: request ids, the stage, the upstream's status, the
change's id and a hash of its diff. Never the diff, the prompt, the
critique, a token or the requester. Fetch's saved output is a hash: the
change itself is kept by ``snapshots``, out of the job that operators see.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

import httpx

from criticizer import snapshots
from criticizer.codes import CLASSIFIER, check
from criticizer.settings import Settings
from redrive import App, FullJitter, Permanent, Stage, add_context, current_job, stage

PROMPT = ('You review code changes. Answer JSON {"verdict": "<one line>", "comments": ["..."]}.')


def _required(payload: dict[str, Any], *names: str) -> None:
    missing = [n for n in names if not isinstance(payload.get(n), str)]
    if missing:
        raise Permanent(f"the change misses required fields: {', '.join(missing)}", code="SCHEMA_INVALID")


def make_app(settings: Settings | None = None) -> App:
    """The criticizer's app; with no settings, from the environment (so
    ``redrive worker criticizer.pipeline:make_app()`` runs it)."""
    settings = settings or Settings.from_env()
    app = App(settings.database_url, classifier=CLASSIFIER)
    backoff = FullJitter(initial=timedelta(seconds=settings.backoff_initial_s), multiplier=settings.backoff_multiplier,
                         cap=timedelta(seconds=settings.backoff_max_s))
    budget = settings.attempts_per_stage

    def call(service: str, method: str, url: str, token: str, **options: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}  # none configured: the service decides
        answer = httpx.request(method, url, headers={**headers, **options.pop("headers", {})},
                               timeout=settings.call_timeout_s, **options)
        add_context(**{f"{service}_status": answer.status_code,
                       f"{service}_request_id": answer.headers.get("X-Request-Id")})
        check(answer, service)
        return answer

    def fetch(change_id: str) -> dict[str, Any]:
        change = call("source", "GET", f"{settings.source_url}/changes/{change_id}", settings.source_token).json()
        if not isinstance(change, dict):
            raise Permanent("the change is not a JSON object", code="SCHEMA_INVALID")
        _required(change, "id", "title", "diff")
        return {"snapshot": snapshots.save(settings.snapshots_dir, {"title": change["title"], "diff": change["diff"]})}

    def critique(change_id: str, fetched: dict[str, Any]) -> dict[str, Any]:
        change = snapshots.load(settings.snapshots_dir, fetched["snapshot"])
        add_context(diff_sha256=hashlib.sha256(change["diff"].encode()).hexdigest()[:16],
                    diff_lines=len(change["diff"].splitlines()))
        asked = json.dumps({"change_id": change_id, **change})
        answer = call("llm", "POST", f"{settings.llm_url}/v1/chat/completions", settings.llm_api_key,
                      json={"model": settings.llm_model, "response_format": {"type": "json_object"},
                            "messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": asked}]})
        content = answer.json()["choices"][0]["message"]["content"]
        review = json.loads(content)  # not JSON: SCHEMA_INVALID, as the table files it
        if not isinstance(review, dict):
            raise Permanent("the critique is not a JSON object", code="SCHEMA_INVALID")
        _required(review, "verdict")
        return {"verdict": review["verdict"], "comments": [str(c) for c in review.get("comments") or []]}

    def post(change_id: str, channel: str, review: dict[str, Any]) -> dict[str, Any]:
        # The webhook keeps one message per Idempotency-Key: a retry after a
        # lost answer, or a replay from the start, posts nothing twice.
        answer = call("webhook", "POST", f"{settings.webhook_url}/{channel}", settings.webhook_token,
                      headers={"Idempotency-Key": f"critique:{current_job().id}"},
                      json={"change_id": change_id, "text": review["verdict"]})
        return {"message_id": answer.json().get("id")}

    @app.task(stages=[Stage("fetch", max_attempts=budget, backoff=backoff),
                      Stage("llm", max_attempts=budget, backoff=backoff),
                      Stage("notify", max_attempts=budget, backoff=backoff)])
    def criticize(change_id: str, channel: str, requested_by: str = "") -> dict[str, Any]:
        add_context(change_id=change_id, channel=channel)
        change = stage("fetch", fetch, change_id)
        review = stage("llm", critique, change_id, change)
        posted = stage("notify", post, change_id, channel, review)
        return {"verdict": review["verdict"], **posted}

    return app
