"""redrive in a Django project (``docs/django.md``).

Add ``"redrive.contrib.django"`` to ``INSTALLED_APPS``, make your app with
``redrive.contrib.django.app()`` (its database is one of Django's), and run
``python manage.py redrive worker`` (or any other ``redrive`` command).
Each installed app's ``tasks`` module is imported when Django starts, so
its tasks are registered wherever Django runs. Settings, all optional::

    REDRIVE = {
        "APP": "shop.tasks:app",    # the App the commands use (default: the first app() made)
        "DATABASE": "default",      # the Django database redrive's tables live in
    }

Enqueue inside ``transaction.atomic()`` with ``conn=connection``: the job
exists if and only if the transaction commits (``docs/transactions.md``).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

from redrive.app import App
from redrive.errors import ConfigError
from redrive.settings import Settings


def database_url(alias: str | None = None) -> str:
    """The redrive URL of a Django database (``alias``; default:
    ``REDRIVE["DATABASE"]``, else ``"default"``): SQLite or PostgreSQL
    (psycopg 3). Read from the connection's settings now in use, so under
    Django's test runner or pytest-django it is the test database."""
    from django.db import connections

    alias = alias or _settings().get("DATABASE", "default")
    if alias not in connections.settings:
        raise ConfigError(f"no Django database {alias!r} in settings.DATABASES")
    db = connections[alias].settings_dict
    engine = db.get("ENGINE", "")
    if engine.endswith("sqlite3"):
        name = str(db["NAME"])
        if name == ":memory:" or "mode=memory" in name:
            raise ConfigError(f"Django database {alias!r} is SQLite in memory, which redrive's processes cannot "
                              "share: give it a file (for tests: DATABASES[alias]['TEST']['NAME'])")
        return f"sqlite:///{os.path.abspath(name)}"
    if engine.endswith("postgresql"):
        user = quote(db.get("USER") or "", safe="")
        password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
        at = f"{user}{password}@" if user else ""
        port = f":{db['PORT']}" if db.get("PORT") else ""
        return f"postgresql://{at}{db.get('HOST') or 'localhost'}{port}/{db['NAME']}"
    raise ConfigError(f"Django database {alias!r} uses {engine}: redrive runs on SQLite or PostgreSQL")


class DjangoApp(App):
    """An ``App`` whose database is a Django database, read when its store
    opens rather than when it is made: ``tasks.py`` makes the app as Django
    starts, before a test runner has switched to its test database."""

    def __init__(self, alias: str | None = None, **options: Any) -> None:
        self._alias = alias
        self._chosen = False
        super().__init__(database_url(alias), **options)
        self._chosen = False  # the URL above is Django's, read again at first use

    @property
    def settings(self) -> Settings:
        if self._chosen:
            return self._settings
        return self._settings.with_(database_url=database_url(self._alias))

    @settings.setter
    def settings(self, value: Settings) -> None:
        self._settings = value
        self._chosen = True  # use_database (the CLI's --database-url): that one, from now on


def app(alias: str | None = None, **options: Any) -> App:
    """An ``App`` on a Django database (``database_url(alias)``, read when
    the store opens); ``options`` as ``App``'s (a classifier, dependencies)."""
    return DjangoApp(alias, **options)


def on_commit(task: Any, *args: Any, using: str | None = None, **kwargs: Any) -> None:
    """Enqueue ``task`` (a task, or ``task.options(...)``) with these
    arguments once the Django transaction of ``using`` commits, and never if
    it rolls back: for a Django database that is not redrive's, whose
    transaction the job cannot join. Django runs it at once outside
    ``atomic()``. Unlike ``conn=``, this is not atomic: a process that dies
    between the commit and the enqueue loses the job (docs/django.md)."""
    from django.db import transaction

    if not callable(getattr(task, "enqueue", None)):
        raise ConfigError("on_commit takes a task (or task.options(...)) and its arguments")
    transaction.on_commit(lambda: task.enqueue(*args, **kwargs), using=using)


def app_path() -> str:
    """The App the ``redrive`` command runs: ``REDRIVE["APP"]``, else the one
    ``App`` the installed apps' ``tasks`` modules hold."""
    import sys

    from django.apps import apps

    given = _settings().get("APP")
    if given:
        return str(given)
    modules = [(config.name, sys.modules.get(f"{config.name}.tasks")) for config in apps.get_app_configs()]
    found = sorted({f"{name}.tasks:{attr}" for name, module in modules if module is not None
                    for attr, value in vars(module).items() if isinstance(value, App)})
    if len(found) != 1:
        raise ConfigError("set REDRIVE = {'APP': 'yourapp.tasks:app'} in your settings: "
                          + (f"the tasks modules hold {len(found)} apps ({', '.join(found)})" if found
                             else "no installed app's tasks module holds one"))
    return found[0]


def _settings() -> dict[str, Any]:
    from django.conf import settings

    return dict(getattr(settings, "REDRIVE", {}) or {})
