"""SQL lives in .sql files: named blocks (``-- name: job_get``) and numbered migrations."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from redrive.errors import ConfigError

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_MIGRATION = re.compile(r"^(\d{4})_(\w+)\.sql$")


_PARAM = re.compile(r"(?<![:\w]):(\w+)")  # :name, not a ::cast
_WORD = re.compile(r"\{(\w+)\}")
_FRAGMENT = re.compile(r"\{(_\w+)\}")

# How each dialect spells what shared.sql writes as {word}: a type, the
# database's clock, or a test against a list of statuses (an array on
# PostgreSQL, JSON text on SQLite, which has no arrays), or where a job's
# events are read (PostgreSQL writes some only into the job's row: migration
# 0032), or whether the live table's newest-first index leaves running jobs
# out (PostgreSQL's, migration 0035: the job list reads them apart). A
# {_name} is a fragment of shared.sql itself (a filter two queries share).
# SQLite keeps times as seconds since the epoch.
SPELLINGS: dict[str, dict[str, str]] = {
    "postgres": {"uuid": "uuid", "time": "timestamptz", "now": "now()", "second": "interval '1 second'",
                 "text_list": "text[]", "in_statuses": "= ANY(CAST(:statuses AS text[]))",
                 "events": "redrive_job_event_read",
                 "not_running": "status <> 'running'", "running_apart": "status = 'running'"},
    "sqlite": {"uuid": "TEXT", "time": "REAL", "now": ":now", "second": "1",
               "text_list": "TEXT", "in_statuses": "IN (SELECT value FROM json_each(:statuses))",
               "events": "redrive_job_event", "not_running": "1", "running_apart": "0"},
}


def load_queries(package: str, *, dialect: str) -> dict[str, str]:
    """A store's named queries: its own, in the files of its ``sql/`` folder
    (one file a concept: the claim, the endings, the reads...), and the
    ``shared.sql`` both SQL stores run, each ``{word}`` spelled as
    ``dialect`` spells it (``SPELLINGS``) and, for PostgreSQL, ``:name``
    parameters read as ``%(name)s``, psycopg's style. A name is one query
    in all of them."""
    own: dict[str, str] = {}
    for entry in sorted(resources.files(package).joinpath("sql").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            found = _named(entry.read_text(), f"{package}/sql/{entry.name}")
            if again := sorted(own.keys() & found.keys()):
                raise ConfigError(f"{package}/sql/{entry.name} names {', '.join(again)} again")
            own.update(found)
    shared = _named(resources.files(__package__).joinpath("shared.sql").read_text(), "shared.sql")
    if both := sorted(own.keys() & shared.keys()):
        raise ConfigError(f"{package}/sql names {', '.join(both)}, which shared.sql holds")
    words = {**SPELLINGS[dialect], **{name: sql for name, sql in shared.items() if name.startswith("_")}}
    def spell(sql: str) -> str:
        sql = _WORD.sub(lambda m: _WORD.sub(lambda n: words[n.group(1)], words[m.group(1)]), sql)
        return _PARAM.sub(r"%(\1)s", sql) if dialect == "postgres" else sql
    spelled = {name: spell(sql) for name, sql in shared.items() if not name.startswith("_")}
    # A store's own fragments ({_name}, written in its own style) and shared.sql's,
    # spelled as above, go into its own queries; nothing else in them is touched
    # ('{}'::jsonb is a literal there).
    pieces = {**{name: spell(sql) for name, sql in shared.items() if name.startswith("_")},
              **{name: sql for name, sql in own.items() if name.startswith("_")}}
    def spelled_out(sql: str) -> str:  # a fragment may hold another
        return _FRAGMENT.sub(lambda m: spelled_out(pieces[m.group(1)]), sql)
    own = {name: spelled_out(sql) for name, sql in own.items() if not name.startswith("_")}
    return {**spelled, **own}


def _named(text: str, where: str) -> dict[str, str]:
    parts = _NAME.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    queries = {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}
    if len(queries) != len(parts[1::2]):
        raise ConfigError(f"{where} names a query twice")
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
