"""The breaker state machine against a small reference model (Hypothesis),
plus the configuration errors users meet first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from redrive.core.breaker import (
    Breaker,
    BreakerPolicy,
    Call,
    State,
    _record_one,
    admit,
    failed_call,
    force_closed,
    force_open,
    probe_passed,
    record,
    time_open,
    trial_returned,
)
from redrive.core.classify import DEFAULT_CLASSIFIER, Classifier, Kind
from redrive.core.taxonomy import ErrorCode, Taxonomy
from redrive.errors import ConfigError, Permanent, Transient


class Model:
    """The rules of issue 4, written as plainly as possible: every call kept,
    the window recomputed from scratch each time."""

    def __init__(self, policy: BreakerPolicy) -> None:
        self.p = policy
        self.state = "closed"
        self.calls: list[tuple[float, bool]] = []
        self.opened_at: float | None = None
        self.started = self.succeeded = 0
        self.trial_at = 0.0
        self.forced = False

    def window(self, now: float) -> list[tuple[float, bool]]:
        calls = self.calls
        if self.p.window_time is not None:
            calls = [c for c in calls if c[0] > now - self.p.window_time.total_seconds()]
        if self.p.window_calls is not None:
            calls = calls[-self.p.window_calls:]
        return calls

    def open(self, now: float) -> None:
        self.state, self.opened_at, self.calls = "open", now, []
        self.started = self.succeeded = 0

    def close(self) -> None:
        self.state, self.opened_at, self.calls = "closed", None, []
        self.started = self.succeeded = 0
        self.forced = False

    def record(self, ok: bool, now: float) -> None:
        if self.state == "open":
            return
        if self.state == "half_open":
            if not ok:
                self.open(now)
            else:
                self.succeeded += 1
                if self.succeeded >= self.p.trial_calls:
                    self.close()
            return
        self.calls.append((now, ok))
        window = self.window(now)
        failed = sum(1 for _, good in window if not good)
        if len(window) >= self.p.min_calls and failed * 100 >= self.p.failure_rate * len(window):
            self.open(now)

    def admit(self, now: float, probe_decides: bool) -> bool:
        if self.state == "closed":
            return True
        if self.state == "open":
            if self.forced or probe_decides or now < self.opened_at + self.p.wait.total_seconds():
                return False
            self.state, self.started, self.succeeded = "half_open", 0, 0
        if self.started >= self.p.trial_calls and now >= self.trial_at + self.p.wait.total_seconds():
            self.started = self.succeeded  # permits whose holders never said: handed out again
        if self.started < self.p.trial_calls:
            self.started += 1
            self.trial_at = now
            return True
        return False

    def trial_returned(self) -> None:
        if self.state == "half_open" and self.started > self.succeeded:
            self.started -= 1


@st.composite
def policies(draw) -> BreakerPolicy:
    by_count = draw(st.booleans())
    return BreakerPolicy(
        failure_rate=float(draw(st.integers(1, 100))),
        window_calls=draw(st.integers(5, 12)) if by_count else None,
        window_time=None if by_count else timedelta(seconds=draw(st.integers(2, 30))),
        min_calls=draw(st.integers(1, 5)),
        wait=timedelta(seconds=draw(st.integers(1, 20))),
        trial_calls=draw(st.integers(1, 3)),
    )


class BreakerMachine(RuleBasedStateMachine):
    @initialize(policy=policies(), probe=st.booleans())
    def start(self, policy: BreakerPolicy, probe: bool) -> None:
        self.policy, self.probe = policy, probe
        self.breaker, self.model, self.now = Breaker(), Model(policy), 1000.0
        self.spent = 0.0

    @rule(seconds=st.floats(0, 15))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @rule(ok=st.booleans())
    def a_call_ends(self, ok: bool) -> None:
        self.breaker = record(self.breaker, self.policy, [Call(self.now, ok)], self.now)
        self.model.record(ok, self.now)
        if self.model.state == "closed":  # the window the decision was made on
            assert [(c.at, c.ok) for c in self.breaker.window] == self.model.window(self.now)

    @rule()
    def a_call_asks(self) -> None:
        allowed, self.breaker = admit(self.breaker, self.policy, self.now, probe_decides=self.probe)
        assert allowed == self.model.admit(self.now, self.probe)

    @rule()
    def a_trial_ends_without_a_verdict(self) -> None:
        self.breaker = trial_returned(self.breaker)
        self.model.trial_returned()

    @rule()
    def the_probe_passes(self) -> None:
        self.breaker = probe_passed(self.breaker, self.now)
        if self.model.state == "open" and not self.model.forced:
            self.model.state, self.model.started, self.model.succeeded = "half_open", 0, 0

    @rule()
    def an_operator_forces_it_open(self) -> None:
        self.breaker = force_open(self.breaker, self.now)
        if self.model.state != "open":
            self.model.open(self.now)
        self.model.forced, self.model.started, self.model.succeeded = True, 0, 0

    @rule()
    def an_operator_closes_it(self) -> None:
        self.breaker = force_closed(self.breaker, self.now)
        self.model.close()

    @invariant()
    def agrees_with_the_model(self) -> None:
        b, m = self.breaker, self.model
        assert (b.state.value, b.forced) == (m.state, m.forced)
        assert (b.trials_started, b.trials_ok) == (m.started, m.succeeded)
        if m.state == "open":
            assert b.opened_at is not None

    @invariant()
    def time_open_only_grows(self) -> None:
        spent = time_open(self.breaker, self.now)
        assert spent >= self.spent - 1e-9
        self.spent = spent


TestBreakerMachine = BreakerMachine.TestCase
TestBreakerMachine.settings = settings(max_examples=150, stateful_step_count=60, deadline=None)


def test_seed_003_defaults_open_at_half_of_the_last_twenty_with_ten_calls() -> None:
    policy = BreakerPolicy()
    failing = [Call(0.0, False)] * 9
    assert record(Breaker(), policy, failing, 0.0).state is State.CLOSED  # under the minimum
    four_of_ten = [Call(0.0, False)] * 4 + [Call(0.0, True)] * 6
    assert record(Breaker(), policy, four_of_ten, 0.0).state is State.CLOSED
    five_of_ten = [Call(0.0, True)] * 5 + [Call(0.0, False)] * 5
    opened = record(Breaker(), policy, five_of_ten, 0.0)
    assert opened.state is State.OPEN and opened.opened_at == 0.0
    # closed to calls for the 30 s wait, then one trial call
    assert admit(opened, policy, 29.9) == (False, opened)
    allowed, trying = admit(opened, policy, 30.0)
    assert allowed and trying.state is State.HALF_OPEN
    assert admit(trying, policy, 30.1)[0] is False  # one permit only
    closed = record(trying, policy, [Call(31.0, True)], 31.0)
    assert closed.state is State.CLOSED and time_open(closed, 99.0) == 31.0


@pytest.mark.parametrize("kwargs, phrase", [
    ({"failure_rate": 0}, "percentage"),
    ({"failure_rate": 120}, "percentage"),
    ({"failure_rate": -5}, "percentage"),
    ({"window_calls": 0}, "window_calls"),
    ({"min_calls": 0}, "min_calls"),
    ({"window_calls": None, "window_time": timedelta(0)}, "window_time"),
    ({"window_calls": None}, "exactly one window"),
    ({"window_time": timedelta(seconds=5)}, "exactly one window"),
    ({"wait": timedelta(0)}, "wait"),
    ({"trial_calls": 0}, "trial_calls"),
    ({"min_calls": 30}, "never open"),
    ({"failure_codes": "GW_5XX"}, "failure_codes"),
    ({"failure_codes": set()}, "failure_codes"),
    ({"failure_codes": {"GW_5XX", 5}}, "failure_codes"),
])
def test_bad_policies_are_refused_when_declared(kwargs: dict, phrase: str) -> None:
    with pytest.raises(ConfigError, match=phrase):
        BreakerPolicy(**kwargs)


_POLICIES = st.one_of(
    st.builds(lambda n, m, r: BreakerPolicy(window_calls=n, min_calls=min(m, n), failure_rate=r),
              st.integers(1, 8), st.integers(1, 8), st.sampled_from([10.0, 50.0, 100.0])),
    st.builds(lambda s, m, r: BreakerPolicy(window_calls=None, window_time=timedelta(seconds=s),
                                            min_calls=m, failure_rate=r),
              st.integers(1, 5), st.integers(1, 8), st.sampled_from([10.0, 50.0, 100.0])),
)
_CALLS = st.lists(st.builds(Call, st.floats(90, 100), st.booleans()), max_size=40)


@settings(max_examples=1000)
@given(policy=_POLICIES, window=_CALLS, calls=_CALLS,
       state=st.sampled_from([State.CLOSED, State.HALF_OPEN, State.OPEN]), trials_ok=st.integers(0, 2))
def test_folding_a_batch_equals_recording_each_call(policy, window, calls, state, trials_ok) -> None:
    start = Breaker(state=state, window=tuple(window) if state is State.CLOSED else (),
                    opened_at=95.0 if state is not State.CLOSED else None, trials_ok=trials_ok)
    one_by_one = start
    for call in calls:
        one_by_one = _record_one(one_by_one, policy, call, 100.0)
    batched = record(start, policy, calls, 100.0)
    assert batched == one_by_one and batched.changes == one_by_one.changes


POLICY_ONE_TRIAL = BreakerPolicy(window_calls=4, min_calls=2, wait=timedelta(seconds=30), trial_calls=1)


def _half_open_with_its_trial_out() -> Breaker:
    b = record(Breaker(), POLICY_ONE_TRIAL, [Call(0, False), Call(1, False)], 1)
    assert b.state is State.OPEN
    allowed, b = admit(b, POLICY_ONE_TRIAL, 40)
    assert allowed and b.state is State.HALF_OPEN
    assert admit(b, POLICY_ONE_TRIAL, 41)[0] is False  # one trial at a time
    return b


def test_a_trial_without_a_verdict_gives_its_permit_back() -> None:
    b = trial_returned(_half_open_with_its_trial_out())  # the trial job failed for a reason of its own
    allowed, b = admit(b, POLICY_ONE_TRIAL, 42)
    assert allowed and b.state is State.HALF_OPEN


def test_a_trial_whose_holder_died_is_handed_out_again_after_the_wait() -> None:
    b = _half_open_with_its_trial_out()  # and its worker is killed: no verdict, no return
    assert admit(b, POLICY_ONE_TRIAL, 69)[0] is False
    allowed, b = admit(b, POLICY_ONE_TRIAL, 70)
    assert allowed
    b = record(b, POLICY_ONE_TRIAL, [Call(71, True)], 71)
    assert b.state is State.CLOSED  # it reached an ending by itself


NOW_DT = datetime(2026, 11, 26, tzinfo=UTC)
GATEWAY = Classifier(
    taxonomy=Taxonomy([ErrorCode("GW_5XX", True, "busy"), ErrorCode("GW_TIMEOUT", True, "slow"),
                       ErrorCode("IO_ERROR", True, "disk"), ErrorCode("UNKNOWN", False, "bug")],
                      aliases={"GW_UNAVAILABLE": "GW_5XX"}),
    kinds={**{k: "GW_5XX" for k in Kind}, Kind.TIMEOUT: "GW_TIMEOUT"}, statuses={503: "GW_UNAVAILABLE"},
    unclassified="UNKNOWN")


@pytest.mark.parametrize(("classifier", "exc", "counts"), [
    # A failed call, as the classifier recognises it: a refused connection, a timeout, 5xx, 429
    (DEFAULT_CLASSIFIER, ConnectionRefusedError("refused"), True),
    (DEFAULT_CLASSIFIER, TimeoutError("slow"), True),
    (DEFAULT_CLASSIFIER, Transient("upstream busy", code="UPSTREAM_5XX"), True),
    (DEFAULT_CLASSIFIER, Transient("slow down", code="RATE_LIMITED"), True),
    (GATEWAY, Transient("gateway down", code="GW_UNAVAILABLE"), True),  # an alias of a call's code
    (GATEWAY, TimeoutError("slow"), True),
    # The job's own doing: a local disk error, a bug, a task's own transient code
    (GATEWAY, Transient("cannot write the result", code="IO_ERROR"), False),
    (GATEWAY, Permanent("cannot write the result", code="IO_ERROR"), False),
    (DEFAULT_CLASSIFIER, OSError("No space left on device"), False),
    (DEFAULT_CLASSIFIER, ValueError("bug"), False),
    (DEFAULT_CLASSIFIER, Transient("try later"), False),
])
def test_only_a_failed_call_counts_against_a_dependency(classifier, exc, counts) -> None:
    failure = classifier.exception(exc, now=NOW_DT)
    assert failed_call(failure, BreakerPolicy(), classifier) is counts


def test_a_policys_own_codes_decide_what_counts() -> None:
    policy = BreakerPolicy(failure_codes={"GW_TIMEOUT"})
    assert failed_call(GATEWAY.exception(TimeoutError("slow"), now=NOW_DT), policy, GATEWAY)
    assert not failed_call(GATEWAY.exception(ConnectionRefusedError("down"), now=NOW_DT), policy, GATEWAY)
    assert failed_call(GATEWAY.exception(Transient("full", code="IO_ERROR"), now=NOW_DT),
                       BreakerPolicy(failure_codes=["IO_ERROR"]), GATEWAY)
