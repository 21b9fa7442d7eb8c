"""How SQLite commits is a setting: full by default, normal when asked for,
anything else refused before the file is touched."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from redrive import ConfigError, Settings
from redrive.store.sqlite.store import SQLiteStore
from redrive.store.url import open_store

SYNCHRONOUS = {1: "normal", 2: "full"}  # what PRAGMA synchronous answers


def _mode(store: SQLiteStore) -> str:
    return SYNCHRONOUS[store._conn.execute("PRAGMA synchronous").fetchone()[0]]


@pytest.mark.parametrize(("env", "mode"), [({}, "full"), ({"REDRIVE_SQLITE_SYNCHRONOUS": "normal"}, "normal")])
def test_the_store_commits_as_the_settings_say(tmp_path, env: dict[str, str], mode: str) -> None:
    url = f"sqlite:///{tmp_path / 'redrive.db'}"
    store = open_store(url, settings=Settings.load({"REDRIVE_DATABASE_URL": url, **env}))
    try:
        assert isinstance(store, SQLiteStore)
        assert _mode(store) == mode
        # still WAL: normal is only safe with the write-ahead log
        assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        store.close()


def test_an_unknown_mode_is_refused_and_no_file_is_made(tmp_path) -> None:
    path = tmp_path / "redrive.db"
    with pytest.raises(ConfigError, match="synchronous is full or normal, not 'OFF'"):
        SQLiteStore(str(path), synchronous="OFF")
    assert not path.exists()


def test_a_typo_in_the_environment_is_one_clear_line_from_the_cli(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'redrive.db'}"
    bad = subprocess.run([sys.executable, "-m", "redrive", "jobs", "list"], capture_output=True, text=True,
                         env={**os.environ, "REDRIVE_DATABASE_URL": url, "REDRIVE_SQLITE_SYNCHRONOUS": "sometimes"},
                         timeout=60)
    assert bad.returncode != 0
    assert "sqlite_synchronous is full or normal, not 'sometimes'" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert not (tmp_path / "redrive.db").exists()
