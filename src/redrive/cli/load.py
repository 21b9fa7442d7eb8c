"""Finding what a command works on: the app (``myapp.tasks:app``), the
database, and the operator API acting as the person at the terminal."""

from __future__ import annotations

import argparse
import getpass
import importlib
import inspect
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from redrive.admin import Actor, Admin
from redrive.app import App
from redrive.errors import ConfigError


def load_app(path: str | None, database_url: str | None = None) -> App:
    """``package.module:app``, or ``package.module:make_app()`` for an app a
    function builds (called with no arguments, as uvicorn's ``--factory``)."""
    if not path:
        raise ConfigError("this command needs your app: redrive COMMAND myapp.tasks:app, --app, or REDRIVE_APP")
    module_name, _, attr = path.partition(":")
    factory = attr.endswith("()")
    attr = attr.removesuffix("()")
    if not module_name or not attr.isidentifier():
        raise ConfigError(f"the app path {path!r} must look like package.module:app or package.module:make_app()")
    # Like uvicorn and celery: the current directory is importable.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r}: {exc}") from None
    found = getattr(module, attr, None)
    if factory:
        if not callable(found):
            raise ConfigError(f"{module_name}:{attr} is not a function that builds an app")
        try:
            inspect.signature(found).bind()
        except TypeError as exc:
            raise ConfigError(f"{module_name}:{attr}() must build the app with no arguments ({exc})") from None
        found = found()
    elif callable(found) and not isinstance(found, App):
        raise ConfigError(f"{path!r} is a function: to have redrive call it, write {module_name}:{attr}()")
    if not isinstance(found, App):
        raise ConfigError(f"{path!r} is not a redrive App" + (" (the function returned something else)" if factory
                                                                   else ""))
    if database_url:
        found.use_database(database_url)
    lasting(found.settings.database_url)
    return found


def store_url(args: argparse.Namespace) -> str:
    """The database an operator verb works on: --database-url, else the app's, else the environment's."""
    if args.database_url:
        return lasting(args.database_url)
    if getattr(args, "app", None):
        with load_app(args.app) as app:
            return app.settings.database_url
    return lasting(args.settings.database_url)


def lasting(url: str) -> str:
    """A command runs in a process of its own: a memory store would forget its work when it exits."""
    if url.split("://", 1)[0].lower() == "memory":
        raise ConfigError("memory:// lives only as long as one process; a command needs sqlite:/// or postgresql://")
    return url


@contextmanager
def admin_of(args: argparse.Namespace, *, owner: str | None = None) -> Iterator[Admin]:
    """The operator API on the command's database, acting as the person at the
    terminal (``--by``), or for ``owner`` when one is given."""
    actor = Actor.acting_for(owner, name=by(args)) if owner else Actor.operator(by(args))
    if getattr(args, "app", None):
        with load_app(args.app, args.database_url) as app:
            yield app.admin(actor)
    else:
        with Admin.open(store_url(args), actor=actor, settings=args.settings) as admin:
            yield admin


def by(args: argparse.Namespace) -> str:
    """Who acts, for the record: ``--by``, else the login name."""
    if getattr(args, "by", None):
        return args.by
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no login name in some containers
        return "cli"
