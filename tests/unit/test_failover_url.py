"""A URL that names a primary and its standbys (libpq's multi-host form):
which servers it names, and that redrive asks for the writable one unless
the URL chose (store/postgres/failover.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from psycopg.conninfo import conninfo_to_dict

from redrive.errors import ConfigError
from redrive.store.postgres.connection import _describe, _link_defaults
from redrive.store.postgres.failover import servers


@pytest.mark.parametrize(("url", "named"), [
    ("postgresql://u@db-a:5432,db-b:6432/app", ["db-a:5432", "db-b:6432"]),
    ("postgresql://u@db-a,db-b/app", ["db-a:5432", "db-b:5432"]),
    ("postgresql://u@db-a,db-b:6000/app", ["db-a:5432", "db-b:6000"]),
    ("postgresql://u@db-a:7000/app", ["db-a:7000"]),
    ("postgresql:///app", ["localhost:5432"]),
])
def test_the_servers_a_url_names(url: str, named: list[str]) -> None:
    assert servers(conninfo_to_dict(url)) == named
    assert _describe(url) == f"{','.join(named)}/app"


def test_a_url_naming_several_servers_asks_for_the_writable_one_unless_it_says() -> None:
    wait = timedelta(seconds=30)
    assert _link_defaults("postgresql://u@a:1,b:2/app", wait)["target_session_attrs"] == "read-write"
    assert "target_session_attrs" not in _link_defaults("postgresql://u@a:1,b:2/app?target_session_attrs=any", wait)
    assert "target_session_attrs" not in _link_defaults("postgresql://u@a:1/app", wait)


def test_a_malformed_url_names_no_password() -> None:
    with pytest.raises(ConfigError) as refused:
        _describe("postgresql://u:s3cret@a:1,b:2/app?target_session_attrs=nonsense&x")
    assert "s3cret" not in str(refused.value)
