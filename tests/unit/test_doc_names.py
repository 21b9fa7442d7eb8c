"""Every name a doc puts in backticks as a file, a module or a function of
redrive exists, so a renamed module or function cannot leave a guide
pointing at nothing. Three kinds of names are checked:

- a path (``core/transitions.py``, ``store/postgres/sql/``): some file or
  folder of the repository ends with it;
- a dotted module path (``redrive.testing.suite``, ``redrive.Worker``): it
  imports, and each attribute after the module is there;
- a function or class: anything written as a call (``drain(app)``,
  ``jobs_reclaim(worker_id=)``), and in ``docs/architecture.md``, which maps
  concepts to code, every identifier: a ``def``, a ``class``, a field or
  constant, or a named statement of a SQL file defines it.
"""

from __future__ import annotations

import ast
import importlib
import re
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_TICKED = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_PATH = re.compile(r"^[\w.-]+(/[\w.-]+)*(/|\.(py|sql|md|yml|yaml|toml|html|js|css))$")
_DOTTED = re.compile(r"^redrive(\.\w+)+$")
_CALL = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\(")
_IDENTIFIER = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*$")
# A reader's own files in the examples they follow, and what a build makes: not the repository's.
_READERS = ("myapp/", "shop/", "enqueue.py", "test_tasks.py", "tasks.py", "settings.py", "conftest.py", "manage.py",
            ".env", "pyproject.toml", ".venv/", "build/")
_PLACEHOLDER = re.compile(r"<|[A-Z]{4,}")  # store/<dialect>/..., bench/results/DATE-PROFILE.md
# Functions of Python, the libraries and the databases that the docs name as calls.
# (A dotted call is ours only when what it starts with is: ``gc.freeze()`` is Python's.)
_NOT_OURS = {"raise_for_status", "commit", "atomic", "f", "pg_backend_pid", "gen_random_uuid", "clock_timestamp",
             "randomblob", "julianday", "json_each"}


def _ticked(doc: Path) -> list[str]:
    return _TICKED.findall(_FENCE.sub("", doc.read_text()))


@cache
def _defined() -> frozenset[str]:
    """Every name src/ defines (functions, classes, fields and constants,
    methods, named SQL statements) and the fixtures of the tests' conftests."""
    names: set[str] = set()
    for path in [*(REPO / "src" / "redrive").rglob("*"), *(REPO / "tests").rglob("conftest.py")]:
        if path.suffix == ".py":
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names.add(node.name)
                if isinstance(node, ast.Module | ast.ClassDef):  # constants, class attributes, fields: no locals
                    for each in node.body:
                        targets = each.targets if isinstance(each, ast.Assign) else \
                            [each.target] if isinstance(each, ast.AnnAssign) else []
                        names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif path.suffix == ".sql":
            names |= set(re.findall(r"^-- name: (\w+)", path.read_text(), re.M))
            names |= set(re.findall(r"(?:TABLE|FUNCTION|INDEX|VIEW)\s+(?:IF NOT EXISTS\s+)?(\w+)", path.read_text()))
    return frozenset(names)


def _path_exists(token: str) -> bool:
    """A path with a folder is the repository's, the package's, or one of its
    packages' (``sql/claim.sql`` in a store's); a bare file name is a file of
    the package, the repository's top, docs/ or the tests."""
    token = token.removeprefix("./").rstrip("/")
    package = REPO / "src" / "redrive"
    if "/" in token:
        roots = [REPO, REPO / "src", REPO / "docs", package, *package.glob("*/"), *package.glob("*/*/")]
        return any((root / token).exists() for root in roots)
    return any((root / token).exists() for root in (REPO, REPO / "docs")) or \
        any(package.rglob(token)) or (token.startswith("test_") and any((REPO / "tests").rglob(token)))


def _ours(token: str) -> bool:
    """``redrive.testing.suite`` and ``redrive.Worker`` name code;
    ``redrive.task`` is a span attribute's name (docs/observability.md)."""
    import redrive

    second = token.split(".")[1]
    return second in redrive.__all__ or (Path(redrive.__file__).parent / second).exists() or \
        (Path(redrive.__file__).parent / f"{second}.py").exists()


def _dotted_exists(token: str) -> bool:
    parts = token.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(found, attr):
                return False
            found = getattr(found, attr)
        return True
    return False


def _problems(doc: Path) -> list[str]:
    wrong = []
    strict = doc.name == "architecture.md"
    for token in _ticked(doc):
        token = token.strip()
        if (_PATH.match(token) and "/" in token) or token.endswith((".py", ".sql")):
            if not token.startswith(_READERS) and not _PLACEHOLDER.search(token) and not _path_exists(token):
                wrong.append(f"no file {token}")
        elif _DOTTED.match(token.split("(")[0]):
            if _ours(token) and not _dotted_exists(token.split("(")[0]):
                wrong.append(f"no module or name {token}")
        elif (call := _CALL.match(token)) or (strict and _IDENTIFIER.match(token)):
            dotted = (call.group(1) if call else token).split(".")
            name = dotted[-1]
            if len(dotted) > 1 and dotted[0] not in _defined():
                continue
            if name not in _NOT_OURS and not name.isupper() and name not in _defined():
                wrong.append(f"no function or class {token}")
    return wrong


def test_the_checks_find_a_stale_name() -> None:
    # the names the architecture doc held once the code had moved on
    assert not _path_exists("store/memory.py") and not _path_exists("admin.py") and not _path_exists("cli.py")
    assert "lease_expired" not in _defined() and "reclaimed" not in _defined()
    assert _path_exists("core/transitions.py") and _path_exists("store/postgres/sql/endings.sql")
    assert _dotted_exists("redrive.testing.suite") and not _dotted_exists("redrive.testing.nothing")
    assert {"jobs_finish", "ends_as", "Finished", "redrive_finish_others"} <= _defined()
    assert "jobs_complete" not in _defined()  # one ending statement on PostgreSQL since migration 0034


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: str(d.relative_to(REPO)))
def test_every_name_in_backticks_exists(doc: Path) -> None:
    assert not _problems(doc), _problems(doc)
