"""What the README's and docs' snippets call but cannot have here: an LLM,
a review site, a mail provider, a converter. A snippet names the fakes it
uses (``<!-- snippet: fakes=... -->``) and gets only those."""

from __future__ import annotations

GATEWAY = "http://127.0.0.1:9"  # nothing listens: a snippet that calls it would fail, not reach the internet


def fetch_review(review_id: int) -> dict:
    return {"id": review_id, "text": f"review {review_id}: the cache is never invalidated"}


def call_llm(page: dict) -> str:
    return f"critique of {page['id']}"


def post_comment(review_id: int, critique: str) -> None:
    return None


_sent: dict[str, str] = {}


def send_email(recipient: str, token: str) -> str:
    """Like a provider that takes an idempotency key: the same token sends once."""
    return _sent.setdefault(token, f"msg-{len(_sent) + 1}-{recipient}")


def find_email(token: str, provider_id: str | None) -> str | None:
    return _sent.get(token)


def find_conversion(doc: str) -> str | None:
    return None


def convert_pdf(doc: str) -> str:
    return doc.removesuffix(".pdf") + ".xml"


def users_in(timezone: str) -> list[int]:
    return [1, 2] if timezone == "Europe/Paris" else [3]
