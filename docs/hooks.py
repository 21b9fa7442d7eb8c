"""MkDocs hooks for the docs site (mkdocs.yml): the reference pages that are
read off the code at build time, so they cannot drift from it. A page
holding one of the markers below gets, in its place:

- ``<!-- reference: cli -->``: every ``redrive`` command and its help;
- ``<!-- reference: settings -->``: every setting, its environment
  variable and what it says of its default;
- ``<!-- reference: http -->``: every route of the HTTP API, from the
  app's own OpenAPI document.
"""

from __future__ import annotations

import argparse
import io
from contextlib import redirect_stdout
from dataclasses import fields
from typing import Any


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for marker, render in (("cli", _cli), ("settings", _settings), ("http", _http)):
        tag = f"<!-- reference: {marker} -->"
        if tag in markdown:
            markdown = markdown.replace(tag, render())
    return markdown


def _cli() -> str:
    from redrive.cli import _parser

    parser = _parser()
    out = [_help(parser, "redrive")]
    for name, sub in _subcommands(parser):
        out.append(f"### `redrive {name}`\n\n{_help(sub, f'redrive {name}')}")
        for inner, deeper in _subcommands(sub):
            out.append(f"### `redrive {name} {inner}`\n\n{_help(deeper, f'redrive {name} {inner}')}")
    return "\n\n".join(out)


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


def _help(parser: argparse.ArgumentParser, prog: str) -> str:
    parser.prog = prog
    text = io.StringIO()
    with redirect_stdout(text):
        parser.print_help()
    return f"```text\n{text.getvalue().rstrip()}\n```"


def _settings() -> str:
    from redrive.settings import Settings

    rows = ["| setting | environment | what it is, and its default |", "|---|---|---|"]
    for each in fields(Settings):
        meta = each.metadata
        env = f"`{meta['env']}`" + (f" (or `{meta['alias']}`)" if meta.get("alias") else "")
        rows.append(f"| `{each.name}` | {env} | {meta['doc']} |")
    return "\n".join(rows)


def _http() -> str:
    from redrive import App
    from redrive.http import TokenAuth, create_api

    spec = create_api(App("memory://"), auth=TokenAuth({})).openapi()
    rows = ["| route | what it answers |", "|---|---|"]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            said = (operation.get("description") or operation.get("summary") or "").split("\n\n")[0]
            rows.append(f"| `{method.upper()} {path}` | {' '.join(said.split())} |")
    return "\n".join(rows)
