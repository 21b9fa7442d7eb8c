"""redrive in a real Django project (tests/djangoproject), as its user runs
it: the app from Django's database settings, the tasks found through
INSTALLED_APPS, enqueues inside transaction.atomic() from a view, and
``manage.py redrive ...`` for the worker and the operator commands."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from redrive import Actor, Admin, Status
from redrive.testing import wait_for

PROJECT = Path(__file__).resolve().parents[1] / "djangoproject"


def _env(db_url: str, tmp_path: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith(("REDRIVE_", "DJANGO_", "PYTEST_"))},
            "DJANGO_TEST_DB": db_url, "DJANGO_LEDGER_DIR": str(tmp_path), "PYTHONPATH": str(PROJECT)}


def _manage(db_url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=PROJECT, env=_env(db_url, tmp_path),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_the_projects_own_pytest_django_tests_pass_on_its_test_database(db_url: str, tmp_path: Path) -> None:
    """pytest-django makes the test database with Django's migrations, and
    redrive's tables come with them; the jobs of the view's transactions
    land there, and the testing kit runs them."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
                          cwd=PROJECT, env=_env(db_url, tmp_path), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "4 passed" in done.stdout


def test_a_django_project_enqueues_in_its_transactions_and_runs_its_worker_through_manage_py(
        db_url: str, tmp_path: Path, request) -> None:
    if db_url.startswith("postgres"):
        db_url = request.getfixturevalue("pg_empty_url")  # no redrive tables yet
    # Django's migrate makes redrive's tables too
    migrated = _manage(db_url, tmp_path, "migrate")
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    if db_url.startswith("postgres"):
        assert "redrive: applied migrations [1, 2," in migrated.stdout
    assert "redrive: applied" not in _manage(db_url, tmp_path, "migrate").stdout  # and once only
    # A view's transaction that fails leaves no job; one that commits leaves one
    shell = _manage(db_url, tmp_path, "shell", "-c", "from shop.views import place_order\n"
                                           "try:\n    place_order(1, fail=True)\nexcept RuntimeError:\n    pass\n"
                                           "place_order(2)")
    assert shell.returncode == 0, shell.stderr[-2000:]
    listed = _manage(db_url, tmp_path, "redrive", "jobs", "list")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert listed.stdout.count("send_receipt") == 1, listed.stdout
    # The worker, started the Django way, finds the task through INSTALLED_APPS and runs the job
    log = tmp_path / "worker.log"
    with log.open("w") as err:
        worker = subprocess.Popen([sys.executable, "manage.py", "redrive", "worker", "--poll-interval", "0.1"],
                                  cwd=PROJECT, env=_env(db_url, tmp_path), stdout=subprocess.DEVNULL,
                                  stderr=err)
    try:
        with Admin.open(db_url, actor=Actor.operator("test")) as admin:
            wait_for(lambda: [j.status for j in admin.jobs(limit=10).items] == [Status.SUCCEEDED], timeout=60,
                     what="the receipt job run by the Django worker")
            (job,) = admin.jobs(limit=10).items
            assert job.args == [2] and job.result["order"] == 2 and job.result["email"] == "2@example.com"
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, log.read_text()[-2000:]


def _in_project(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by Python in the project, its settings configured and not yet set up."""
    env = {**_env(f"sqlite:///{tmp_path / 'x.db'}", tmp_path), "DJANGO_SETTINGS_MODULE": "project.settings"}
    return subprocess.run([sys.executable, "-c", "import django, sys\nfrom django.conf import settings\n" + code],
                          cwd=PROJECT, env=env, capture_output=True, text=True, timeout=60)


def test_a_project_with_no_app_to_find_gets_one_line_saying_what_to_set(tmp_path: Path) -> None:
    done = _in_project(tmp_path, "django.setup()\n"
                                 "settings.REDRIVE = {'APP': ''}\n"
                                 "sys.modules['shop.tasks'].app2 = sys.modules['shop.tasks'].app\n"
                                 "from django.core.management import call_command\n"
                                 "call_command('redrive', 'queues')")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("django.core.management.base.CommandError: set REDRIVE")


def test_a_sqlite_database_in_memory_is_refused_in_one_line(tmp_path: Path) -> None:
    done = _in_project(tmp_path, "settings.DATABASES['default']['NAME'] = ':memory:'\n"
                                 "from redrive import ConfigError\n"
                                 "try:\n    django.setup()\nexcept ConfigError as exc:\n    print(exc.message)\n")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == ("Django database 'default' is SQLite in memory, which redrive's processes "
                                   "cannot share: give it a file (for tests: DATABASES[alias]['TEST']['NAME'])")
