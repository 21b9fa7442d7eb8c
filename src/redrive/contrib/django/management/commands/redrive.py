"""``python manage.py redrive COMMAND ...``: the ``redrive`` command on the
project's app and database (``manage.py redrive worker``, ``manage.py
redrive jobs list``, ``manage.py redrive dead list``...), whatever follows
``redrive`` passed on as ``redrive`` takes it."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from redrive import cli
from redrive.contrib.django import app_path, database_url
from redrive.errors import ConfigError


class Command(BaseCommand):
    help = "Run a redrive command (worker, jobs, dead, queues, migrate...) on this project's app and database."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("args", nargs=argparse.REMAINDER, help="the redrive command and its options")

    def run_from_argv(self, argv: list[str]) -> None:
        # Everything after `redrive` is redrive's: Django's own parser must not take --help or -v from it.
        self._redrive(argv[2:])

    def handle(self, *args: str, **options: Any) -> None:
        self._redrive(list(args))

    def _redrive(self, argv: list[str]) -> None:
        try:
            project = ["--app", app_path(), "--database-url", database_url()]
        except ConfigError as exc:
            raise CommandError(exc.message) from None
        code = cli.main([*project, *argv])  # the user's own --app or --database-url, after, wins
        if code:
            raise SystemExit(code)
