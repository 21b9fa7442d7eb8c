"""The stores' SQL files: shared.sql spelled per dialect, and a store's own
fragments ({_name}) put into its own queries, nothing else in them touched."""

from __future__ import annotations

import re

import pytest

from redrive.store.sql import load_queries


@pytest.mark.parametrize(("package", "dialect"), [("redrive.store.postgres", "postgres"),
                                                  ("redrive.store.sqlite", "sqlite")])
def test_every_query_is_spelled_whole(package: str, dialect: str) -> None:
    queries = load_queries(package, dialect=dialect)
    assert not [name for name in queries if name.startswith("_")]  # fragments are not queries
    for name, sql in queries.items():
        assert not re.search(r"\{_?\w+\}", sql.replace("'{}'", "")), name  # no word or fragment left unspelled
    assert ("= ANY(" in queries["jobs_page"]) == (dialect == "postgres")
    assert ("json_each" in queries["jobs_page"]) == (dialect == "sqlite")


def test_a_postgres_fragment_is_written_once_and_used_by_both_deletes() -> None:
    queries = load_queries("redrive.store.postgres", dialect="postgres")
    for name in ("jobs_prune", "jobs_delete"):
        assert "DELETE FROM redrive_permit AS p USING jobs" in queries[name], name
    assert "nullif(kwargs, '{}')" in queries["jobs_insert"]  # a literal, not a fragment
