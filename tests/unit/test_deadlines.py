"""The deadline watcher of PostgreSQL calls, on real sockets: a call that
overruns is cut at its deadline, whatever came before it, and calls that end
in time do not wake the watching thread one by one."""

from __future__ import annotations

import socket
import time

import pytest

from redrive.store.postgres.deadlines import Deadlines, Overran


class Link:
    """What the watcher needs of a connection: its socket and whether it is closed."""

    def __init__(self) -> None:
        self.ours, self.theirs = socket.socketpair()
        self.closed = False

    def fileno(self) -> int:
        return self.ours.fileno()

    def close(self) -> None:
        self.closed = True
        self.ours.close()
        self.theirs.close()

    def block(self) -> None:
        """A read that no answer ends: only a cut returns it (with b"")."""
        if self.ours.recv(1) == b"":
            raise ConnectionError("cut")


def _cut_after(watcher: Deadlines, seconds: float) -> float:
    link = Link()
    started = time.monotonic()
    with pytest.raises(Overran), watcher.watch(link, seconds):
        link.block()
    took = time.monotonic() - started
    link.close()
    return took


def _call(watcher: Deadlines, seconds: float, lasting: float = 0.0) -> None:
    link = Link()
    with watcher.watch(link, seconds):
        time.sleep(lasting)
    link.close()


def test_a_shorter_deadline_after_a_longer_one_is_kept() -> None:
    watcher = Deadlines()
    _call(watcher, 60)  # the thread now sleeps towards a deadline a minute away
    assert _cut_after(watcher, 0.2) < 1.5


def test_calls_that_end_in_time_do_not_wake_the_watcher_and_an_overrun_is_still_cut() -> None:
    watcher = Deadlines()
    _call(watcher, 0.5)
    time.sleep(0.05)  # the thread is asleep
    wakes = 0
    sleep = watcher._lock.wait

    def counted(timeout: float | None = None) -> bool:
        nonlocal wakes
        wakes += 1
        return sleep(timeout)

    watcher._lock.wait = counted  # type: ignore[method-assign]
    for _ in range(300):
        _call(watcher, 0.5, lasting=0.0005)  # a call's round trip
    # the thread woke about once per 0.5 s of calls, not once a call
    assert wakes <= 5, wakes
    assert 0.4 < _cut_after(watcher, 0.5) < 2.0
