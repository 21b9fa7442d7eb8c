import os

from psycopg.conninfo import conninfo_to_dict

SECRET_KEY = "a test project's, not a secret"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "redrive.contrib.django", "shop"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_url = os.environ["DJANGO_TEST_DB"]  # sqlite:///path or postgresql://...
if _url.startswith("sqlite:///"):
    _path = _url.removeprefix("sqlite:///")
    # redrive's processes share the database through its file: tests get a file too, not memory
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": _path,
                             "TEST": {"NAME": _path.replace(".db", "-test.db")}}}
else:
    _info = conninfo_to_dict(_url)
    DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": _info["dbname"],
                             "USER": _info.get("user", ""), "HOST": _info.get("host", ""),
                             "PORT": _info.get("port", "")}}
# A second database that is not redrive's: a job cannot join its transactions,
# so redrive.contrib.django.on_commit enqueues after they commit.
_ledger = os.path.join(os.environ.get("DJANGO_LEDGER_DIR", os.path.dirname(os.path.abspath(__file__))), "ledger.db")
DATABASES["ledger"] = {"ENGINE": "django.db.backends.sqlite3", "NAME": _ledger,
                       "TEST": {"NAME": _ledger.replace(".db", "-test.db")}}
