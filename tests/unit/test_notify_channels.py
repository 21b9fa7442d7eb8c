"""A channel's own checks, where it is made in code."""

from __future__ import annotations

import pytest

from redrive.errors import ConfigError
from redrive.notify import Email, Slack


@pytest.mark.parametrize("timeout_s", [0, -1, 31, 600, True, "10"])
def test_a_channel_waits_no_longer_than_the_notification_task_allows(timeout_s) -> None:
    # The task that sends allows each channel 30 s: a longer wait would be cut off mid-send
    with pytest.raises(ConfigError, match="timeout_s must be more than 0 and at most 30"):
        Slack("https://hooks.slack.com/services/T/B/x", timeout_s=timeout_s)
    with pytest.raises(ConfigError, match="timeout_s must be more than 0 and at most 30"):
        Email(host="127.0.0.1", sender="redrive@example.com", recipients=["ops@example.com"], timeout_s=timeout_s)

