"""SQL lives in .sql files: named blocks (``-- name: job_get``) and numbered migrations."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from redrive.errors import ConfigError

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_MIGRATION = re.compile(r"^(\d{4})_(\w+)\.sql$")


def load_queries(package: str) -> dict[str, str]:
    text = resources.files(package).joinpath("queries.sql").read_text()
    parts = _NAME.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    queries = {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}
    if len(queries) != len(parts[1::2]):
        raise ConfigError(f"{package}/queries.sql names a query twice")
    return queries


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations(package: str) -> list[Migration]:
    folder = resources.files(package).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        if m := _MIGRATION.match(entry.name):
            found.append(Migration(int(m[1]), m[2], entry.read_text()))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise ConfigError(f"{package} migrations are not numbered 1..n without gaps")
    return found
