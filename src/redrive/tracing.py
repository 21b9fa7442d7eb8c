"""Traces, with the OpenTelemetry API (``pip install redrive[otel]``) and the
messaging semantic conventions: an enqueue is a PRODUCER span ``send
QUEUE`` whose context travels with each job it creates (in the job's
creation event); each run of the job is a CONSUMER span ``process QUEUE``
linked to it, current while the task runs, that ends with the run's
outcome. Without the API installed, or with no tracer provider set (the
API's default does nothing), none of this costs more than one check.
docs/observability.md has the attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

try:
    from opentelemetry import trace
except ImportError:  # the engine runs without the otel extra
    trace = None  # type: ignore[assignment]
# ``propagate`` (which loads the propagators' entry points) and ``context`` are
# imported where a span is made, so that only a process that traces pays for them.

SYSTEM = "redrive"


def enabled() -> bool:
    """Whether spans go anywhere: the API is installed and an SDK set a tracer provider."""
    if trace is None:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


@contextmanager
def sending(queues_of: Callable[[], Sequence[str]]) -> Iterator[dict[str, str] | None]:
    """Around an enqueue of jobs on the queues ``queues_of()`` names (asked
    only when tracing is on): yields the carrier each new job keeps, or None."""
    if not enabled():
        yield None
        return
    queues = queues_of()
    names = sorted(set(queues))
    attributes: dict[str, Any] = {"messaging.system": SYSTEM, "messaging.operation.name": "send",
                                  "messaging.operation.type": "send"}
    if len(names) == 1:
        attributes["messaging.destination.name"] = names[0]
    if len(queues) > 1:
        attributes["messaging.batch.message_count"] = len(queues)
    from opentelemetry import propagate

    tracer = trace.get_tracer("redrive")
    with tracer.start_as_current_span(f"send {names[0] if len(names) == 1 else 'redrive'}",
                                      kind=trace.SpanKind.PRODUCER, attributes=attributes):
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        yield carrier or None


class Run:
    """A run's span, current while the task runs; ``end`` says how it ended."""

    def __init__(self, job: Any, worker: str, carrier: Mapping[str, str] | None) -> None:
        from opentelemetry import context as otel_context
        from opentelemetry import propagate

        links = []
        if carrier:
            sent = trace.get_current_span(propagate.extract(dict(carrier))).get_span_context()
            if sent.is_valid:
                links.append(trace.Link(sent))
        self.span = trace.get_tracer("redrive").start_span(
            f"process {job.queue}", kind=trace.SpanKind.CONSUMER, links=links, attributes={
                "messaging.system": SYSTEM, "messaging.operation.name": "process",
                "messaging.operation.type": "process", "messaging.destination.name": job.queue,
                "messaging.message.id": str(job.id), "messaging.consumer.group.name": job.queue,
                "redrive.task": job.task, "redrive.attempt": job.attempts, "redrive.worker": worker,
            })
        self._token: object | None = otel_context.attach(trace.set_span_in_context(self.span))

    def end(self, outcome: str, error_code: str | None = None) -> None:
        """``outcome``: succeeded, retry, failed, cancelled, held or lost."""
        if self._token is None:
            return
        from opentelemetry import context as otel_context

        otel_context.detach(self._token)  # type: ignore[arg-type]
        self._token = None
        self.span.set_attribute("redrive.outcome", outcome)
        if error_code:
            self.span.set_attribute("error.type", error_code)
            self.span.set_status(trace.Status(trace.StatusCode.ERROR, error_code))
        elif outcome == "succeeded":
            self.span.set_status(trace.Status(trace.StatusCode.OK))
        self.span.end()


def sent_carrier(events: Sequence[Any]) -> Mapping[str, str] | None:
    """The carrier a job's creation event keeps, if its enqueue was traced."""
    for event in events:
        if event.from_status is None:
            found = event.meta.get("trace")
            return found if isinstance(found, dict) else None
    return None
