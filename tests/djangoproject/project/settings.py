import os

from psycopg.conninfo import conninfo_to_dict

SECRET_KEY = "a test project's, not a secret"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "redrive.contrib.django", "shop"]

_url = os.environ["DJANGO_TEST_DB"]  # sqlite:///path or postgresql://...
if _url.startswith("sqlite:///"):
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": _url.removeprefix("sqlite:///")}}
else:
    _info = conninfo_to_dict(_url)
    DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": _info["dbname"],
                             "USER": _info.get("user", ""), "HOST": _info.get("host", ""),
                             "PORT": _info.get("port", "")}}
