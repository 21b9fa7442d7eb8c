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


def database_url(alias: str | None = None) -> str:
    """The redrive URL of a Django database (``settings.DATABASES[alias]``;
    default: ``REDRIVE["DATABASE"]``, else ``"default"``): SQLite or
    PostgreSQL (psycopg 3)."""
    from django.conf import settings

    alias = alias or _settings().get("DATABASE", "default")
    try:
        db = settings.DATABASES[alias]
    except KeyError:
        raise ConfigError(f"no Django database {alias!r} in settings.DATABASES") from None
    engine = db.get("ENGINE", "")
    if engine.endswith("sqlite3"):
        return f"sqlite:///{os.path.abspath(str(db['NAME']))}"
    if engine.endswith("postgresql"):
        user = quote(db.get("USER") or "", safe="")
        password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
        at = f"{user}{password}@" if user else ""
        port = f":{db['PORT']}" if db.get("PORT") else ""
        return f"postgresql://{at}{db.get('HOST') or 'localhost'}{port}/{db['NAME']}"
    raise ConfigError(f"Django database {alias!r} uses {engine}: redrive runs on SQLite or PostgreSQL")


def app(alias: str | None = None, **options: Any) -> App:
    """An ``App`` on a Django database (``database_url(alias)``); ``options``
    as ``App``'s (a classifier, dependencies)."""
    return App(database_url(alias), **options)


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
