"""The circuit breaker as a pure state machine; time is passed in (seconds).

closed -> open when, over the window, failures reach ``failure_rate`` percent
of at least ``min_calls`` calls. open -> half_open after ``wait`` (or when the
dependency's health probe passes). half_open admits ``trial_calls`` calls:
closed when they all succeed, open again at the first failure. A trial that
ends without a verdict (the job failed for a reason of its own) gives its
permit back; permits handed out ``wait`` ago without a verdict (the worker
died) are handed out again: a half-open breaker always reaches open or closed. An operator can
force it open (it stays open until closed by hand) or close it (a fresh
window). Every worker shares one state through the store; this module only
says what the next state is.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from enum import StrEnum
from typing import Any

from redrive.core.classify import Classifier, Failure, Kind
from redrive.errors import ConfigError


class BreakerMode(StrEnum):
    HOLD = "hold"  # jobs that need an open dependency stay queued, spending nothing
    FAIL_FAST = "fail_fast"  # they fail at once with the dependency's code


class State(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """Defaults after the converter's reliability layer: >= 50 % of the last 20 calls, at least 10, wait 30 s."""

    failure_rate: float = 50.0  # percent of the window's calls
    window_calls: int | None = 20  # count window: the last N calls
    window_time: timedelta | None = None  # or time window: calls of the last T
    min_calls: int = 10
    wait: timedelta = timedelta(seconds=30)
    trial_calls: int = 1
    slow_call: timedelta | None = None  # calls slower than this count as failures
    # The error codes that are this dependency's failures. None: the codes the
    # task's classifier gives a failed call (see ``failed_call``).
    failure_codes: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.failure_codes is not None:
            if isinstance(self.failure_codes, str) or not all(isinstance(c, str) and c for c in self.failure_codes) \
                    or not self.failure_codes:
                raise ConfigError("failure_codes is a non-empty set of error codes, such as {'GW_5XX', 'GW_TIMEOUT'}")
            object.__setattr__(self, "failure_codes", frozenset(self.failure_codes))
        if isinstance(self.failure_rate, bool) or not isinstance(self.failure_rate, (int, float)) \
                or not 0 < self.failure_rate <= 100:
            raise ConfigError(f"failure_rate must be a percentage above 0 and at most 100, got {self.failure_rate!r}")
        if (self.window_calls is None) == (self.window_time is None):
            raise ConfigError("give a breaker exactly one window: window_calls or window_time")
        if self.window_calls is not None and not _positive_int(self.window_calls):
            raise ConfigError(f"window_calls must be a positive integer, got {self.window_calls!r}")
        if self.window_time is not None and self.window_time <= timedelta(0):
            raise ConfigError("window_time must be longer than zero")
        if not _positive_int(self.min_calls):
            raise ConfigError(f"min_calls must be a positive integer, got {self.min_calls!r}")
        if self.window_calls is not None and self.min_calls > self.window_calls:
            raise ConfigError("min_calls cannot exceed window_calls: the breaker could never open")
        if self.wait <= timedelta(0):
            raise ConfigError("wait must be longer than zero")
        if not _positive_int(self.trial_calls):
            raise ConfigError(f"trial_calls must be a positive integer, got {self.trial_calls!r}")
        if self.slow_call is not None and self.slow_call <= timedelta(0):
            raise ConfigError("slow_call must be longer than zero")


# What happened when a call to another service failed, as opposed to the job's
# own doing (a disk error, a bug, a request we got wrong).
CALL_KINDS = (Kind.TIMEOUT, Kind.CONNECT, Kind.NETWORK, Kind.RATE_LIMITED, Kind.SERVER_ERROR)


def failed_call(failure: Failure, policy: BreakerPolicy, classifier: Classifier) -> bool:
    """Whether a job's failure is evidence against its dependency: its code is
    one the policy names or, by default, one the classifier gives a failed
    call (a timeout, a refused or broken connection, 429, 5xx). Anything else
    (a local disk error, a bug, a 4xx we caused) says nothing of the
    dependency's health, so it counts neither way."""
    codes = policy.failure_codes
    if codes is None:
        codes = frozenset(classifier.kinds[k] for k in CALL_KINDS) | frozenset(
            code for status, code in classifier.statuses.items() if status in (408, 429) or status >= 500)
    return failure.code in codes or failure.error_class in codes


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True, slots=True)
class Call:
    at: float
    ok: bool


@dataclass(frozen=True, slots=True)
class Breaker:
    """One dependency's shared state."""

    state: State = State.CLOSED
    window: tuple[Call, ...] = ()
    opened_at: float | None = None
    trials_started: int = 0
    trials_ok: int = 0
    forced: bool = False  # forced open by an operator
    open_seconds: float = 0.0  # total time spent open (or half-open) before the current spell
    probed_at: float | None = None  # the last health probe, so one worker probes per interval
    trial_at: float | None = None  # when the last trial permit was handed out
    changes: tuple[tuple[State, State, str], ...] = field(default=(), compare=False)

    def _to(self, state: State, now: float, reason: str, **changes: Any) -> Breaker:
        """Move to ``state``; time from opening until closing (or reopening)
        is added to ``open_seconds``, and reopening restarts the wait."""
        spent, opened_at = self.open_seconds, self.opened_at
        if state in (State.OPEN, State.CLOSED) and opened_at is not None:
            spent += max(0.0, now - opened_at)
            opened_at = None
        if state is State.OPEN:
            opened_at = now
        return replace(self, state=state, opened_at=opened_at, open_seconds=spent,
                       changes=(*self.changes, (self.state, state, reason)), **changes)


def _trim(window: Iterable[Call], policy: BreakerPolicy, now: float) -> tuple[Call, ...]:
    calls = tuple(window)
    if policy.window_time is not None:
        horizon = now - policy.window_time.total_seconds()
        calls = tuple(c for c in calls if c.at > horizon)
    if policy.window_calls is not None:
        calls = calls[-policy.window_calls:]
    return calls


def failure_percent(window: Iterable[Call]) -> float:
    calls = list(window)
    return 100.0 * sum(not c.ok for c in calls) / len(calls) if calls else 0.0


def record(breaker: Breaker, policy: BreakerPolicy, calls: Iterable[Call], now: float) -> Breaker:
    """Fold finished calls into the state, in the order they are given: the
    same as recording them one by one (``_record_one``), but a closed
    breaker's window slides in place, because a worker folds thousands of
    calls at a time and rebuilding the state per call cost 5 µs each."""
    pending = iter(calls)
    for call in pending:
        if breaker.state is State.CLOSED:
            return _record_closed(breaker, policy, itertools.chain((call,), pending), now)
        breaker = _record_one(breaker, policy, call, now)
    return breaker


def _record_closed(b: Breaker, policy: BreakerPolicy, calls: Iterable[Call], now: float) -> Breaker:
    window = deque(_trim(b.window, policy, now))
    failed = sum(not c.ok for c in window)
    horizon = None if policy.window_time is None else now - policy.window_time.total_seconds()
    for call in calls:
        if horizon is None or call.at > horizon:  # else already out of the time window
            window.append(call)
            failed += not call.ok
            if policy.window_calls is not None and len(window) > policy.window_calls:
                failed -= not window.popleft().ok
        if len(window) >= policy.min_calls and 100.0 * failed / len(window) >= policy.failure_rate:
            # open now; an open breaker ignores the calls after this one
            return b._to(State.OPEN, now, f"{100.0 * failed / len(window):.0f}% of {len(window)} calls failed",
                         window=())
    return replace(b, window=tuple(window))


def _record_one(b: Breaker, policy: BreakerPolicy, call: Call, now: float) -> Breaker:
    if b.state is State.OPEN:
        return b  # a call admitted before the breaker opened: it changes nothing now
    if b.state is State.HALF_OPEN:
        if not call.ok:
            return b._to(State.OPEN, now, "trial call failed", trials_started=0, trials_ok=0)
        if b.trials_ok + 1 >= policy.trial_calls:
            return b._to(State.CLOSED, now, "trial calls succeeded", window=(), trials_started=0,
                         trials_ok=0)
        return replace(b, trials_ok=b.trials_ok + 1)
    window = _trim((*b.window, call), policy, now)
    if len(window) >= policy.min_calls and failure_percent(window) >= policy.failure_rate:
        return b._to(State.OPEN, now, f"{failure_percent(window):.0f}% of {len(window)} calls failed",
                     window=())
    return replace(b, window=window)


def admit(b: Breaker, policy: BreakerPolicy, now: float, *, probe_decides: bool = False) -> tuple[bool, Breaker]:
    """May a call go through now? Half-open hands out ``trial_calls`` permits;
    an open breaker turns half-open once its wait is over, unless a health
    probe decides that instead."""
    if b.state is State.CLOSED:
        return True, b
    if b.state is State.OPEN:
        if b.forced or probe_decides or b.opened_at is None \
                or now < b.opened_at + policy.wait.total_seconds():
            return False, b
        b = b._to(State.HALF_OPEN, now, "wait elapsed", trials_started=0, trials_ok=0)
    if b.trials_started >= policy.trial_calls and b.trial_at is not None \
            and now >= b.trial_at + policy.wait.total_seconds():
        b = replace(b, trials_started=b.trials_ok)  # their holders never said: hand them out again
    if b.trials_started < policy.trial_calls:
        return True, replace(b, trials_started=b.trials_started + 1, trial_at=now)
    return False, b


def trial_returned(b: Breaker) -> Breaker:
    """A trial call ended without a verdict on the dependency: its permit comes back."""
    if b.state is not State.HALF_OPEN or b.trials_started <= b.trials_ok:
        return b
    return replace(b, trials_started=b.trials_started - 1)


def probe_passed(b: Breaker, now: float) -> Breaker:
    if b.state is not State.OPEN or b.forced:
        return b
    return b._to(State.HALF_OPEN, now, "health probe passed", trials_started=0, trials_ok=0)


def force_open(b: Breaker, now: float) -> Breaker:
    moved = b if b.state is State.OPEN else b._to(State.OPEN, now, "forced open")
    return replace(moved, forced=True, window=(), trials_started=0, trials_ok=0)


def force_closed(b: Breaker, now: float) -> Breaker:
    moved = b if b.state is State.CLOSED else b._to(State.CLOSED, now, "closed by an operator")
    return replace(moved, forced=False, window=(), trials_started=0, trials_ok=0)


def time_open(b: Breaker, now: float) -> float:
    """Seconds spent open or half-open, the current spell included."""
    current = now - b.opened_at if b.state is not State.CLOSED and b.opened_at is not None else 0.0
    return b.open_seconds + max(0.0, current)


def to_json(b: Breaker) -> dict[str, Any]:
    """The shared state as stored (state changes are stored as events instead)."""
    return {
        "state": b.state.value, "window": [[c.at, c.ok] for c in b.window],
        "opened_at": b.opened_at, "trials_started": b.trials_started, "trials_ok": b.trials_ok,
        "forced": b.forced, "open_seconds": b.open_seconds, "probed_at": b.probed_at, "trial_at": b.trial_at,
    }


def from_json(data: dict[str, Any]) -> Breaker:
    return Breaker(
        state=State(data["state"]), window=tuple(Call(at, ok) for at, ok in data["window"]),
        opened_at=data["opened_at"], trials_started=data["trials_started"],
        trials_ok=data["trials_ok"], forced=data["forced"], open_seconds=data["open_seconds"],
        probed_at=data.get("probed_at"), trial_at=data.get("trial_at"),
    )
