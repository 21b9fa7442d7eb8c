import re
from datetime import timedelta

import pytest

from redrive import ConfigError, Settings


def test_defaults_are_documented_on_every_field() -> None:
    settings = Settings()
    assert settings.database_url == "sqlite:///redrive.db"
    assert settings.worker_lease_ttl == timedelta(seconds=30)
    for f in Settings.__dataclass_fields__.values():
        assert f.metadata["env"] and "Default" in f.metadata["doc"]


def test_code_wins_over_the_environment_which_wins_over_defaults() -> None:
    env = {"WORKER_CONCURRENCY": "3", "WORKER_LEASE_TTL_SEC": "2.5", "RETRY_MAX_ATTEMPTS": "7",
           "JOB_RETENTION_SEC": "604800"}
    settings = Settings.load(env, retry_max_attempts=4)
    assert settings.worker_concurrency == 3
    assert settings.job_retention == timedelta(days=7)
    assert settings.worker_lease_ttl == timedelta(seconds=2.5)
    assert settings.retry_max_attempts == 4


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WORKER_CONCURRENCY": "many"}, "WORKER_CONCURRENCY='many' is not a whole number"),
        ({"REDRIVE_WORKER_LEASE_TTL": "inf"}, "REDRIVE_WORKER_LEASE_TTL: 'inf' is not a duration"),
        ({"REDRIVE_JOB_RETENTION": "soon"}, "REDRIVE_JOB_RETENTION: 'soon' is not a duration"),
        ({"WORKER_CONCURRENCY": "0"}, "worker_concurrency must be from 1 to 1000"),
        ({"WORKER_CONCURRENCY": "100000"}, "worker_concurrency must be from 1 to 1000"),
        ({"WORKER_LEASE_TTL_SEC": "0.1"}, "worker_lease_ttl must be at least"),
        ({"RETRY_MAX_ATTEMPTS": "0"}, "retry_max_attempts must be at least 1"),
        ({"JOB_RETENTION_SEC": "-1"}, "job_retention cannot be negative"),
    ],
)
def test_bad_values_fail_at_construction_with_a_clear_message(env, message) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.load(env)


def test_an_unknown_setting_in_code_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown setting: worker_concurency"):
        Settings.load({}, worker_concurency=3)


def test_every_setting_has_a_redrive_name_and_the_older_names_still_work() -> None:
    for f in Settings.__dataclass_fields__.values():
        assert f.metadata["env"].startswith("REDRIVE_")
    prefixed = Settings.load({"REDRIVE_JOB_RETENTION": "7d", "REDRIVE_WORKER_LEASE_TTL": "45s",
                              "REDRIVE_RETRY_MAX_ATTEMPTS": "5"})
    assert (prefixed.job_retention, prefixed.worker_lease_ttl, prefixed.retry_max_attempts) == (
        timedelta(days=7), timedelta(seconds=45), 5)
    # the REDRIVE_ name wins over its alias
    both = Settings.load({"REDRIVE_WORKER_CONCURRENCY": "4", "WORKER_CONCURRENCY": "9"})
    assert both.worker_concurrency == 4
    assert Settings.load({"JOB_RETENTION_SEC": "7d"}).job_retention == timedelta(days=7)


def test_every_variable_redrive_reads_is_a_setting_and_no_secret_is_in_its_repr() -> None:
    env = {"REDRIVE_SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/sekrit-hook",
           "REDRIVE_SMTP_PASSWORD": "hunter2-smtp", "REDRIVE_API_TOKENS": "tok-0123456789abcdef=operator:ana",
           "REDRIVE_DASHBOARD_SECRET": "cookie-signing-sekrit",
           "REDRIVE_DATABASE_URL": "postgresql://app:db-pass-sekrit@127.0.0.1/app",
           "REDRIVE_LISTEN_URL": "postgresql://app:listen-pass-sekrit@127.0.0.1:5432/app",
           "REDRIVE_SMTP_STARTTLS": "false", "REDRIVE_SMTP_PORT": "2525", "REDRIVE_NOTIFY_WINDOW": "2m",
           "REDRIVE_NOTIFY_TIMEOUT": "3s", "REDRIVE_ALERT_INTERVAL": "5s", "REDRIVE_LOG_FORMAT": "json"}
    settings = Settings.load(env)
    assert (settings.smtp_starttls, settings.smtp_port, settings.notify_window, settings.alert_interval,
            settings.log_format, settings.notify_timeout) == (False, 2525, timedelta(minutes=2), timedelta(seconds=5),
                                                              "json", timedelta(seconds=3))
    shown = repr(settings)
    for secret in ("sekrit-hook", "hunter2-smtp", "tok-0123456789abcdef", "cookie-signing-sekrit", "db-pass-sekrit",
                   "listen-pass-sekrit"):
        assert secret not in shown
    # Nothing else in the package reads a REDRIVE_ variable of its own
    import pathlib
    import re

    import redrive
    root = pathlib.Path(redrive.__file__).parent
    read = {name for path in root.rglob("*.py") if path.name != "settings.py"
            for name in re.findall(r"(?:\.get\(|\[)\"(REDRIVE_[A-Z_]+)\"", path.read_text())}
    assert read <= {"REDRIVE_VERIFY_DIR"}  # verify's message to its own workers, not a setting


@pytest.mark.parametrize(
    ("env", "message"),
    [({"REDRIVE_SMTP_STARTTLS": "maybe"}, "REDRIVE_SMTP_STARTTLS='maybe' is not true or false"),
     ({"REDRIVE_LOG_FORMAT": "xml"}, "log_format is text or json, not 'xml'"),
     ({"REDRIVE_SMTP_PORT": "70000"}, "smtp_port must be a port number"),
     ({"REDRIVE_NOTIFY_WINDOW": "0s"}, "notify_window must be positive"),
     ({"REDRIVE_NOTIFY_TIMEOUT": "2m"}, "notify_timeout must be more than 0 s and at most 30 s"),
     ({"REDRIVE_DATABASE_POOL_MODE": "transactions"}, "database_pool_mode is session or transaction, not 'transactions'"),
     ({"REDRIVE_SQLITE_SYNCHRONOUS": "off"}, "sqlite_synchronous is full or normal, not 'off'"),
     ({"REDRIVE_LISTEN_URL": "sqlite:///x.db"}, "listen_url must be a postgresql:// URL")],
)
def test_the_other_settings_are_checked_when_loaded(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Settings.load(env)
