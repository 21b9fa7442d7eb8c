"""The SQLite store's clock is the kernel's stamp on a file beside the database."""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime

from redrive.store.sqlite.store import SQLiteStore


def test_the_store_reads_time_from_the_file_beside_the_database(tmp_path) -> None:
    store = SQLiteStore(str(tmp_path / "redrive.db"))
    try:
        before = datetime.now(UTC).timestamp()
        now = store.now().timestamp()
        stamped = os.stat(tmp_path / "redrive.db-clock").st_mtime
        assert abs(now - stamped) < 1e-5  # the reading is the file's own stamp
        assert abs(now - before) < 1
    finally:
        store.close()


def test_without_the_clock_file_the_store_says_so_and_uses_its_own_clock(tmp_path, caplog) -> None:
    (tmp_path / "redrive.db-clock").mkdir()  # a directory cannot be opened for writing
    with caplog.at_level(logging.WARNING, logger="redrive.store.sqlite"):
        store = SQLiteStore(str(tmp_path / "redrive.db"))
    try:
        assert "cannot keep the database's clock" in caplog.text
        assert abs(store.now().timestamp() - datetime.now(UTC).timestamp()) < 1
    finally:
        store.close()
