"""The layers of DESIGN.md: core has no I/O, and no module imports a layer
above its own, the package face (``from redrive import ...``) included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "redrive"

# Lower number = lower layer. Modules not listed (errors) sit below everything.
LAYERS = {
    "redrive.core": 1,
    "redrive.settings": 1,
    "redrive.events": 1,
    "redrive.stream": 1,
    "redrive.tracing": 1,
    "redrive.signals": 1,
    "redrive.store": 2,
    "redrive.declarations": 3,
    "redrive.workflows": 3,
    "redrive.client": 3,
    "redrive.transactions": 3,
    "redrive.admin": 3,
    "redrive.app": 3,
    "redrive.views": 3,
    "redrive.runtime": 4,
    "redrive.verify": 5,
    "redrive.cli": 5,
    "redrive.http": 5,
    "redrive.logs": 5,
    "redrive.alerts": 5,
    "redrive.metrics": 5,
    "redrive.notify": 5,
    "redrive.sentry": 5,
    "redrive.contrib": 5,
    "redrive.__main__": 5,
    "redrive.testing": 6,  # test code: imports anything, imported by nothing
}
IO_MODULES = {"sqlite3", "psycopg", "psycopg_pool", "socket", "asyncio", "threading",
              "os", "subprocess", "httpx", "time", "urllib"}


FACE = 6  # ``redrive`` itself re-exports every layer: only the top may import from it


def _layer(module: str) -> int:
    if module == "redrive":
        return FACE
    for prefix, level in sorted(LAYERS.items(), key=lambda kv: -len(kv[0])):
        if module == prefix or module.startswith(prefix + "."):
            return level
    return 0


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(p for p in parts if p != "__init__")
        found.append((name, path))
    return found


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "redrive":
                # ``from redrive import tracing`` is the module; any other name is the package face's
                names |= {f"redrive.{a.name}" if _is_module(a.name) else "redrive" for a in node.names}
            else:
                names.add(node.module)
    return names


def _is_module(name: str) -> bool:
    return (SRC / f"{name}.py").exists() or (SRC / name / "__init__.py").exists()


@pytest.mark.parametrize(("module", "path"), _modules(), ids=lambda v: str(v))
def test_no_module_imports_a_higher_layer(module: str, path: Path) -> None:
    if module == "redrive":
        return  # the package root re-exports every layer on purpose
    for imported in _imports(path):
        if imported.startswith("redrive"):
            assert _layer(imported) <= _layer(module), f"{module} imports {imported}"


def test_core_does_no_io_and_reads_no_clock() -> None:
    for path in (SRC / "core").rglob("*.py"):
        source = path.read_text()
        for imported in _imports(path):
            assert imported.split(".")[0] not in IO_MODULES, f"{path.name} imports {imported}"
        for call in ("datetime.now", ".utcnow(", "time.time", "random.random("):
            assert call not in source, f"{path.name} reads the clock or global randomness: {call}"


def test_the_runtime_and_the_operator_api_never_take_the_app() -> None:
    """They receive what they need (the registry, a client, a store), so no
    one reaches through an App as a service locator."""
    for path in [*(SRC / "runtime").rglob("*.py"), *(SRC / "admin").rglob("*.py"), SRC / "client.py"]:
        assert "redrive.app" not in _imports(path), f"{path.name} imports redrive.app"


# The optional surfaces' modules, documented as imported by users (docs/).
PUBLIC_MODULES = {"redrive", "redrive.alerts", "redrive.metrics", "redrive.logs", "redrive.http", "redrive.notify",
                  "redrive.sentry"}


def test_examples_import_only_the_public_surface() -> None:
    import redrive

    examples = SRC.parents[1] / "examples"
    found = []
    for path in sorted(examples.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "redrive":
                found.append(path)
                assert node.module in PUBLIC_MODULES, (path, node.module)
                if node.module == "redrive":
                    private = [a.name for a in node.names if a.name not in redrive.__all__]
                    assert not private, (path, private)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("redrive.") for a in node.names), path
    assert found  # the check looked at something
