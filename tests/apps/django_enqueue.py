"""Run as a script by tests/integration/test_library_transactions.py: Django
configured on the test's database, one enqueue in a transaction.atomic()
that rolls back and one in one that commits. Prints what happened."""

from __future__ import annotations

import json
import sys

import django
from django.conf import settings
from psycopg.conninfo import conninfo_to_dict


def database(url: str) -> dict:
    if url.startswith("sqlite:///"):
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": url.removeprefix("sqlite:///")}
    info = conninfo_to_dict(url)
    return {"ENGINE": "django.db.backends.postgresql", "NAME": info["dbname"], "USER": info.get("user", ""),
            "HOST": info.get("host", ""), "PORT": info.get("port", "")}


def main(url: str) -> None:
    settings.configure(DATABASES={"default": database(url)}, USE_TZ=True)
    django.setup()
    from django.db import connection, transaction

    from redrive import App, ConfigError

    app = App(url)

    @app.task
    def welcome(user_id: int) -> None: ...

    said: dict = {}
    try:
        with transaction.atomic():
            welcome.options(conn=connection).enqueue(1)
            raise RuntimeError("the view failed")
    except RuntimeError:
        pass
    with transaction.atomic():
        said["committed"] = str(welcome.options(conn=connection).enqueue(2).job.id)
    try:
        welcome.options(conn=connection).enqueue(3)  # outside atomic(): refused, not committed alone
    except ConfigError as exc:
        said["outside"] = exc.message
    said["jobs"] = sorted(j.args[0] for j in app.client.jobs(limit=10).items)
    app.close()
    print(json.dumps(said))


if __name__ == "__main__":
    main(sys.argv[1])
