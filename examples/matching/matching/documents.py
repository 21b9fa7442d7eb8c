"""Documents and their matches: ingestion, pre-processing, candidate
retrieval and the write phase (the design's §3 and §4).

Pre-processing writes are committed on their own: a retry writes the same
values again. The write phase (clear the document's matches, insert the new
edges, update the cluster ids) is one transaction, so a failure at any step
leaves the previous matches intact.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import timedelta
from typing import Any

from matching.db import Db, now
from redrive import App, write_phase

_SUFFIXES = re.compile(r"\b(gmbh|ag|inc|ltd|llc|plc|sa|sarl|bv|co)\b\.?")
_REFERENCES = re.compile(r"\b(?:INV|PO|ORD|REF)-?\d{3,}\b", re.IGNORECASE)
_DIMENSIONS = 32
CANDIDATES = 20  # sent to the LLM at most


def submit(db: Db, app: App, *, id: str, tenant: str, counterparty: str, body: str) -> None:
    """Ingestion: store the document as ``pending`` and publish it to the
    matching queue, in one transaction (no document waits for a job that was
    never made, no job finds no document). Submitting it again (a new
    revision) queues it again."""
    with write_phase(db.conn):
        changed = db.run("UPDATE document SET counterparty = %s, body = %s, matching_status = 'pending', "
                         "matching_error = NULL, matching_failed_at = NULL WHERE id = %s",
                         counterparty, body, id)
        if not changed:
            db.run("INSERT INTO document (id, tenant, counterparty, body, matching_status) "
                   "VALUES (%s, %s, %s, %s, 'pending')", id, tenant, counterparty, body)
        app.enqueue("match_document", args=[id], owner=tenant, conn=db.conn)


def normalize_counterparty(name: str) -> str:
    return " ".join(_SUFFIXES.sub(" ", re.sub(r"[^\w\s]", " ", name.lower())).split())


def references(body: str) -> list[str]:
    return sorted({r.upper().replace("-", "") for r in _REFERENCES.findall(body)})


def embed(text: str) -> list[float]:
    """A small deterministic bag-of-words vector (the real system calls an
    embedding model; the reliability design only needs it rewritten alike)."""
    vector = [0.0] * _DIMENSIONS
    for word in text.lower().split():
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % _DIMENSIONS] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [round(v / norm, 6) for v in vector]


def preprocess(db: Db, document_id: str) -> dict[str, Any]:
    """Normalize, embed, persist (outside the write phase); the document as the LLM sees it."""
    doc = db.one("SELECT id, tenant, counterparty, body FROM document WHERE id = %s", document_id)
    if doc is None:
        raise LookupError(f"document {document_id} does not exist")
    counterparty = normalize_counterparty(doc["counterparty"])
    refs = references(doc["body"])
    searchable = f"{counterparty} {' '.join(refs)} {doc['body']}"
    db.run("UPDATE document SET searchable_text = %s, normalized_counterparty = %s, normalized_references = %s, "
           "embedding = %s WHERE id = %s", searchable, counterparty, json.dumps(refs),
           json.dumps(embed(searchable)), document_id)
    return {"id": document_id, "tenant": doc["tenant"], "counterparty": counterparty, "references": refs}


def candidates(db: Db, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Same tenant, same counterparty, pre-processed: the closest by embedding first."""
    mine = db.one("SELECT embedding FROM document WHERE id = %s", doc["id"])
    found = db.rows("SELECT id, normalized_references, embedding FROM document WHERE tenant = %s "
                    "AND normalized_counterparty = %s AND id <> %s AND embedding IS NOT NULL",
                    doc["tenant"], doc["counterparty"], doc["id"])
    here = json.loads(mine["embedding"]) if mine else []
    found.sort(key=lambda c: (-sum(a * b for a, b in zip(here, json.loads(c["embedding"]), strict=True)), c["id"]))
    return [{"id": c["id"], "references": json.loads(c["normalized_references"])} for c in found[:CANDIDATES]]


def write_matches(db: Db, document_id: str, matches: list[dict[str, Any]]) -> str:
    """The write phase: one transaction, fenced on the job's lease, that also
    marks the document ``succeeded``. Returns the cluster id."""
    matched = sorted({m["document_id"] for m in matches})
    with write_phase(db.conn):
        db.run("DELETE FROM document_match WHERE document_a_id = %s OR document_b_id = %s", document_id, document_id)
        db.many("INSERT INTO document_match (document_a_id, document_b_id, confidence) VALUES (%s, %s, %s)",
                [(min(document_id, m["document_id"]), max(document_id, m["document_id"]), m["confidence"])
                 for m in matches])
        members = {document_id, *matched}
        clusters = [r["cluster_id"] for r in _in(db, "SELECT cluster_id FROM document WHERE id IN ({}) "
                                                     "AND cluster_id IS NOT NULL", matched)]
        members |= {r["id"] for r in _in(db, "SELECT id FROM document WHERE cluster_id IN ({})", clusters)}
        cluster = min(members)
        _in(db, "UPDATE document SET cluster_id = %s WHERE id IN ({})", sorted(members), first=[cluster])
        mark(db, document_id, "succeeded")  # with the matches: a crash cannot leave one without the other
    return cluster


def _in(db: Db, sql: str, values: list[str], first: list[Any] | None = None) -> list[dict[str, Any]]:
    if not values:
        return []
    statement = sql.format(", ".join(["%s"] * len(values)))
    if statement.startswith("UPDATE"):
        db.run(statement, *(first or []), *values)
        return []
    return db.rows(statement, *(first or []), *values)


def mark(db: Db, document_id: str, status: str, *, error: str | None = None) -> None:
    if status == "in-progress":  # a delivery: counted here, not the in-process LLM retries
        db.run("UPDATE document SET matching_status = 'in-progress', matching_attempts = matching_attempts + 1, "
               "matching_started_at = %s WHERE id = %s", now(), document_id)
    elif status == "failed":
        db.run("UPDATE document SET matching_status = 'failed', matching_error = %s, matching_failed_at = %s "
               "WHERE id = %s", error, now(), document_id)
    else:
        db.run("UPDATE document SET matching_status = %s, matching_error = %s WHERE id = %s",
               status, error, document_id)


def stuck(db: Db, older_than_s: float) -> list[str]:
    """Documents in-progress for longer than that: their worker crashed (or hangs)."""
    cutoff = now() - timedelta(seconds=older_than_s)
    return [r["id"] for r in db.rows("SELECT id FROM document WHERE matching_status = 'in-progress' "
                                     "AND matching_started_at < %s ORDER BY id", cutoff)]
