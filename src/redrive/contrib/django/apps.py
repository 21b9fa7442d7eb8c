"""The Django app: imports each installed app's ``tasks`` module once Django
is ready, so every process of the project (web, shell, worker) knows the
tasks (as Celery's ``autodiscover_tasks`` does)."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class RedriveConfig(AppConfig):
    name = "redrive.contrib.django"
    label = "redrive"
    verbose_name = "redrive"

    def ready(self) -> None:
        autodiscover_modules("tasks")
