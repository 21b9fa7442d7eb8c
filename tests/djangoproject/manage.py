"""A Django project using redrive, as a user's would be: run by
tests/integration/test_django.py with its database in DJANGO_TEST_DB."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
