"""Where uploads and results live: sources by content (their sha256), results
by source and mapping, each written whole or not at all (a temporary file,
then a rename), and removed by retention after a configured age."""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

from converter.settings import Settings

_NAME = re.compile(r"^[0-9a-f]{64}\.pdf$")


def source_path(settings: Settings, name: str) -> Path:
    """The stored upload called ``name`` (a job's argument: checked, never a path of the caller's)."""
    if not _NAME.match(name):
        raise ValueError(f"not a source name: {name[:80]!r}")
    return settings.uploads_dir / name


def result_name(source: str, mapping: str) -> str:
    return f"{source[:-4]}-{hashlib.sha256(mapping.encode()).hexdigest()[:16]}.xml"


def result_path(settings: Settings, source: str, mapping: str) -> Path:
    return settings.results_dir / result_name(source, mapping)


def write_atomically(path: Path, text: str) -> None:
    """All of ``text`` at ``path`` or nothing there: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(partial, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def remove_expired(settings: Settings, now: float | None = None) -> int:
    """Delete sources and results older than the retention; returns how many."""
    cutoff = (now or time.time()) - settings.retention_hours * 3600
    removed = 0
    for folder in (settings.uploads_dir, settings.results_dir):
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            try:
                if path.is_file() and path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                pass
    return removed
