"""The docs site is built by the command the README names (``scripts/docs``),
so it cannot rot: the build is strict (a broken link or a reference to a
missing name fails it), every guide of docs/ is in its navigation, every
public module has its reference with every public name in it, and the
pages read off the code (commands, settings, HTTP routes) list all of
theirs."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import pkgutil
import re
import subprocess
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

import redrive
from redrive.cli import _parser
from redrive.http import TokenAuth, create_api
from redrive.settings import Settings

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # mkdocstrings reads every module, Material renders every page: ~20 s

# Every public module, and the reference page that documents it.
REFERENCE = {
    "redrive": "redrive",
    "redrive.errors": "errors",
    "redrive.events": "events",
    "redrive.stream": "events",
    "redrive.transactions": "transactions",
    "redrive.testing": "testing",
    "redrive.testing.plugin": "testing",
    "redrive.http": "http",
    "redrive.metrics": "metrics",
    "redrive.alerts": "alerts",
    "redrive.notify": "notify",
    "redrive.logs": "logs",
    "redrive.tracing": "logs",
    "redrive.sentry": "sentry",
    "redrive.contrib.django": "django",
}
# The modules of the package that are not imported by users, and why.
INTERNAL = {
    "redrive.__main__": "python -m redrive: the CLI, whose page is reference/cli",
    "redrive.admin": "its names are redrive's (Admin, Actor, Bulk, ...)",
    "redrive.app": "App is redrive's",
    "redrive.cli": "the commands are reference/cli, read off its parser",
    "redrive.client": "Client and JobRequest are redrive's",
    "redrive.contrib": "a namespace: redrive.contrib.django is the module",
    "redrive.core": "the domain: its public names are redrive's",
    "redrive.declarations": "Task, Dependency and Registry are redrive's",
    "redrive.runtime": "the worker's machinery: Worker and the task's context are redrive's",
    "redrive.settings": "Settings is redrive's; every setting is reference/settings",
    "redrive.signals": "the CLI's early SIGTERM hold",
    "redrive.store": "the stores and their protocols are on reference/stores",
    "redrive.verify": "redrive verify, a command",
    "redrive.views": "the shapes every surface shows: the HTTP routes' schemas",
    "redrive.workflows": "Workflow, After and StepRef are redrive's",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    # The venv the tests run in has the docs extra (extra=test keeps the script from installing another).
    built = subprocess.run(["bash", str(REPO / "scripts" / "docs"), str(out)], capture_output=True, text=True,
                           timeout=600, env={**os.environ, "extra": "test"})
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
    assert "WARNING" not in built.stderr, built.stderr[-3000:]
    return out


def _ids(site: Path, page: str) -> set[str]:
    return set(re.findall(r'id="([\w.]+)"', (site / "reference" / page / "index.html").read_text()))


def test_every_module_of_the_package_is_in_the_reference_or_said_internal() -> None:
    modules = {f"redrive.{m.name}" for m in pkgutil.iter_modules(redrive.__path__)}
    modules |= {"redrive.contrib.django", "redrive.testing.plugin"}
    unaccounted = modules - set(REFERENCE) - set(INTERNAL) - {"redrive.testing"}
    assert not unaccounted, f"a module neither in the reference nor said internal: {unaccounted}"
    assert not (set(REFERENCE) & set(INTERNAL))


@pytest.mark.parametrize("module", sorted(REFERENCE))
def test_every_public_name_of_a_module_has_its_entry(site: Path, module: str) -> None:
    if module == "redrive.contrib.django":  # importing it needs Django set up: its names read as the reference reads them
        tree = ast.parse((REPO / "src" / "redrive" / "contrib" / "django" / "__init__.py").read_text())
        names = [node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)
                 and not node.name.startswith("_")]
    elif hasattr(found := importlib.import_module(module), "__all__"):
        names = list(found.__all__)
    else:
        names = [name for name, value in vars(found).items() if not name.startswith("_")
                 and (inspect.isclass(value) or inspect.isfunction(value))
                 and getattr(value, "__module__", None) == module]
    assert names, module
    ids = _ids(site, REFERENCE[module])
    missing = [name for name in names if f"{module}.{name}" not in ids]
    assert not missing, f"{module}: no entry for {missing}"


def test_the_fixture_the_stores_and_the_docstrings_come_through(site: Path) -> None:
    testing = (site / "reference" / "testing" / "index.html").read_text()
    assert "redrive_isolate" in testing and "--redrive-database" in testing
    assert "redrive.testing.plugin.redrive_isolate" in _ids(site, "testing")
    stores = _ids(site, "stores")
    for name in ("store.memory.MemoryStore", "store.sqlite.store.SQLiteStore",
                 "store.postgres.store.PostgresStore", "store.port.Store.jobs_finish",
                 "store.operations.Operations", "store.reads.Reads"):
        assert f"redrive.{name}" in stores, name
    page = (site / "reference" / "redrive" / "index.html").read_text()
    assert "Register a sync or async function as a task" in page  # App.task's docstring
    sentry = (site / "reference" / "sentry" / "index.html").read_text()
    assert "SentryReports" in sentry and "fingerprint" in sentry


def test_the_pages_read_off_the_code_list_every_command_setting_and_route(site: Path) -> None:
    cli = (site / "reference" / "cli" / "index.html").read_text()
    parser = _parser()
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    for name in commands:
        assert f"redrive {name}" in cli, name
    assert "redrive dead replay" in cli and "redrive queues pause" in cli and "--shutdown-grace" in cli
    settings = (site / "reference" / "settings" / "index.html").read_text()
    for each in fields(Settings):
        assert each.metadata["env"] in settings, each.name
    routes = (site / "reference" / "routes" / "index.html").read_text()
    for path in create_api(redrive.App("memory://"), auth=TokenAuth({})).openapi()["paths"]:
        assert path in routes, path


def test_every_guide_is_in_the_navigation(site: Path) -> None:
    config = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    listed: set[str] = set()

    def walk(entries: object) -> None:
        for entry in entries if isinstance(entries, list) else []:
            for value in entry.values():
                walk(value) if isinstance(value, list) else listed.add(value)

    walk(config["nav"])
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert pages == listed, f"not in the nav: {pages - listed}; in the nav, no page: {listed - pages}"
    for page in listed:
        assert (site / page.removesuffix(".md").removesuffix("index") / "index.html").exists(), page
