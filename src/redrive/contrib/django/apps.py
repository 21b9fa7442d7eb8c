"""The Django app: imports each installed app's ``tasks`` module once Django
is ready, so every process of the project (web, shell, worker) knows the
tasks (as Celery's ``autodiscover_tasks`` does), and brings redrive's tables
up to date whenever ``manage.py migrate`` runs on redrive's database, so a
test runner's test database has them too."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.module_loading import autodiscover_modules


class RedriveConfig(AppConfig):
    name = "redrive.contrib.django"
    label = "redrive"
    verbose_name = "redrive"

    def ready(self) -> None:
        autodiscover_modules("tasks")
        post_migrate.connect(_migrate_redrive, sender=self)


def _migrate_redrive(sender: Any, using: str, verbosity: int = 1, **_: Any) -> None:
    from redrive.contrib.django import _settings, database_url
    from redrive.store.url import open_store

    if using != _settings().get("DATABASE", "default"):
        return
    store = open_store(database_url(using), check_schema=False)
    try:
        applied = store.migrate()
    finally:
        store.close()
    if applied and verbosity:
        print(f"  redrive: applied migrations {applied}")
