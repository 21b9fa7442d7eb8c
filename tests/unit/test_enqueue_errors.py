"""A wrongly typed time on enqueue is a ConfigError that says what to give, not a TypeError."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from redrive import Actor, App, ConfigError


@pytest.fixture
def app(tmp_path):
    made = App(f"sqlite:///{tmp_path / 'r.db'}")

    @made.task
    def hello() -> None:
        pass

    yield made
    made.close()


@pytest.mark.parametrize(("options", "says"), [
    ({"delay": 3600}, "delay is a timedelta"),
    ({"delay": "5m"}, "delay is a timedelta"),
    ({"delay": timedelta(seconds=-1)}, "delay cannot be negative"),
    ({"run_at": "2026-01-01T00:00:00Z"}, "run_at is a datetime, not str"),
    ({"run_at": datetime(2026, 1, 1)}, "timezone-aware"),
    ({"run_at": datetime(2026, 1, 1, tzinfo=UTC), "delay": timedelta(1)}, "not both"),
])
def test_a_wrong_time_is_a_config_error(app: App, options: dict, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        app.enqueue("hello", **options)
    assert app.admin(Actor.operator("t")).jobs().items == []  # nothing half-written
