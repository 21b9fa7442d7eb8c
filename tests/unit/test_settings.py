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
        ({"WORKER_CONCURRENCY": "many"}, "WORKER_CONCURRENCY='many' is not a number"),
        ({"WORKER_CONCURRENCY": "0"}, "worker_concurrency must be at least 1"),
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
