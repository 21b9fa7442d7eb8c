"""A stop asked of a worker before it can stop gracefully.

A supervisor may send SIGTERM to a worker it has just started. Until the
worker installs its own handler, Python's default would kill it mid-start
(exit -15, not a clean stop). ``hold_stops`` remembers such a SIGTERM
instead, as early as the command line can; the worker then stops at once,
cleanly, having claimed nothing (``Worker.run_until_stopped``).
"""

from __future__ import annotations

import signal

_asked: list[int] = []


def hold_stops() -> None:
    signal.signal(signal.SIGTERM, lambda signum, frame: _asked.append(signum))


def release_stops() -> None:
    """Back to the default: for a command that is not a worker. A stop asked meanwhile ends it now."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if _asked:
        raise SystemExit(128 + signal.SIGTERM)


def stop_asked() -> bool:
    return bool(_asked)
