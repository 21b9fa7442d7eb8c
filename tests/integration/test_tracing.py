"""Traces with OpenTelemetry's SDK capturing spans in memory: an enqueue is
a PRODUCER span whose context travels with the job; the run is a CONSUMER
span linked to it, current while the task runs, with the messaging
conventions' attributes and the outcome."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

from redrive import App, Permanent, Status
from tests.integration.test_worker_in_process import _run_until

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider():
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)
    yield
    # The API sets its global provider once per process; put the default back
    # as OpenTelemetry's own test utilities do, so later tests run untraced.
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    provider.shutdown()


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def app(request, tmp_path):
    url = {"sqlite": f"sqlite:///{tmp_path / 'redrive.db'}", "memory": "memory://"}.get(request.param) \
        or request.getfixturevalue("pg_url")
    app = App(url)
    inner = []

    @app.task
    def convert(doc: str) -> str:
        with trace.get_tracer("myapp").start_as_current_span("call the gateway"):
            inner.append(doc)
        return doc

    @app.task
    def refuse(doc: str) -> None:
        raise Permanent("not a PDF", code="NOT_PDF")

    EXPORTER.clear()
    yield app
    app.close()


def test_a_run_is_linked_to_its_enqueue_and_parents_the_tasks_spans(app: App) -> None:
    with trace.get_tracer("myapp").start_as_current_span("upload"):
        ok = app.enqueue("convert", args=["a.pdf"]).job
        bad = app.enqueue("refuse", args=["b.txt"]).job
    asyncio.run(_run_until(app, lambda: all(app.client.job(j.id).status in (Status.SUCCEEDED, Status.FAILED)
                                            for j in (ok, bad))))
    spans = EXPORTER.get_finished_spans()
    upload = next(s for s in spans if s.name == "upload")
    sends = [s for s in spans if s.kind is SpanKind.PRODUCER]
    runs = {s.attributes["messaging.message.id"]: s for s in spans if s.kind is SpanKind.CONSUMER}
    assert len(sends) == 2 and all(s.name == "send default" and s.parent.span_id == upload.context.span_id
                                   for s in sends)
    assert all(s.attributes["messaging.system"] == "redrive" for s in sends)
    run = runs[str(ok.id)]
    assert run.name == "process default"
    assert [link.context.span_id for link in run.links] == [sends[0].context.span_id]
    assert run.attributes["messaging.operation.type"] == "process"
    assert run.attributes["messaging.destination.name"] == "default"
    assert (run.attributes["redrive.task"], run.attributes["redrive.outcome"]) == ("convert", "succeeded")
    assert run.status.status_code is StatusCode.OK
    inner = next(s for s in spans if s.name == "call the gateway")
    assert inner.parent.span_id == run.context.span_id  # the task's own spans sit under its run
    failed = runs[str(bad.id)]
    assert failed.status.status_code is StatusCode.ERROR and failed.attributes["error.type"] == "NOT_PDF"
    assert [link.context.span_id for link in failed.links] == [sends[1].context.span_id]


def test_with_no_provider_set_tracing_is_off_and_an_enqueue_carries_nothing(app: App) -> None:
    """The API's default provider does nothing: then neither does redrive."""
    from redrive import tracing

    assert tracing.enabled()
    trace._TRACER_PROVIDER, kept = None, trace._TRACER_PROVIDER
    try:
        assert not tracing.enabled()
        with tracing.sending(lambda: ["default"]) as carrier:
            assert carrier is None
    finally:
        trace._TRACER_PROVIDER = kept
