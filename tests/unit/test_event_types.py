"""Events are typed: one small class per kind, its fields the catalogue's
keys, subscribed to by class or by name; a payload that is not the
catalogue's is refused where it is made."""

from __future__ import annotations

import pytest

from redrive.errors import ConfigError
from redrive.events import CATALOGUE, EVENTS, BreakerChanged, JobFailed, JobSucceeded
from redrive.stream import EventStream


def test_each_kind_is_a_class_whose_fields_are_its_payload() -> None:
    assert set(EVENTS) == set(CATALOGUE)
    for name, cls in EVENTS.items():
        assert cls.name == name and frozenset(cls.keys) == CATALOGUE[name]
    failed = JobFailed("j1", "convert", "docs", 3, "llm", "UPSTREAM_5XX", 503, "UPSTREAM_5XX", True, 1.5, 0.2)
    assert (failed.name, failed.task, failed.error_code, failed.upstream_status) == ("job.failed", "convert",
                                                                                     "UPSTREAM_5XX", 503)
    assert failed.data["error_class"] == "UPSTREAM_5XX" and set(failed.data) == CATALOGUE["job.failed"]


def test_a_handler_subscribes_by_class_or_name_and_gets_the_typed_event() -> None:
    stream = EventStream()
    by_class: list = []
    by_name: list = []
    stream.subscribe(by_class.append, names=[JobFailed, BreakerChanged])
    stream.subscribe(by_name.append, names=["job.succeeded"])
    stream.emit("job.failed", job_id="j", task="t", queue="q", attempt=1, stage=None, error_code="X",
                upstream_status=None, error_class="X", retryable=False, duration_s=None, wait_s=None)
    stream.emit(BreakerChanged("gateway", "closed", "open", "5 of 10 calls failed"))
    stream.emit(JobSucceeded("j", "t", "q", 1, 0.5, 0.0))
    assert [type(e) for e in by_class] == [JobFailed, BreakerChanged]
    assert by_class[1].dependency == "gateway" and by_class[1].at > 0
    assert [e.duration_s for e in by_name] == [0.5]


def test_a_payload_that_is_not_the_catalogues_is_refused() -> None:
    stream = EventStream()
    stream.subscribe(lambda e: None)
    with pytest.raises(TypeError):
        stream.emit("job.succeeded", job_id="j", task="t", queue="q", attempt=1, duration_s=0.5)  # no wait_s
    with pytest.raises(ConfigError, match="no such event"):
        stream.subscribe(lambda e: None, names=["job.exploded"])
