"""PostgresStore reads JSON from the server with a decoder of its own (faster
than ``json.loads`` on bytes): it must read every value as ``json.loads`` does."""

from __future__ import annotations

import json

import pytest

from redrive.store.postgres.store import PostgresStore

VALUES = [
    [[], {}, {}, {}, []],
    {"doc": "ünïcødé ✓ 𝄞", "n": [1, 2.5, -3e-7, 10**30], "nested": {"a": [None, True, False]}},
    "just a string",
    12345678901234567890,
    None,
]


@pytest.mark.parametrize("cast", ["jsonb", "json"])
def test_json_values_read_back_as_json_loads_reads_them(pg_url: str, cast: str) -> None:
    store = PostgresStore(pg_url)
    try:
        with store._connection() as conn:
            for value in VALUES:
                text = json.dumps(value)
                for binary in (False, True):
                    with conn.cursor(binary=binary) as cur:
                        (read,) = cur.execute(f"SELECT %s::{cast}", (text,), prepare=False).fetchone().values()
                    assert read == json.loads(text), (value, cast, binary)
            # a json value keeps its text as given, spaces included
            (spaced,) = conn.execute("SELECT '  {\"a\" : [1, 2]}  '::json AS v").fetchone().values()
            assert spaced == {"a": [1, 2]}
    finally:
        store.close()
