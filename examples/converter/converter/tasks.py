"""The converter's redrive app: ``convert`` sends a stored PDF to the
gateway and writes the XML it answers, behind the gateway's circuit breaker;
``refused`` records an upload refused at the door (NOT_PDF) as a failed job.

Failures are classified by the app's classifier (codes.py): the gateway's
400/406/413/415 are GW_4XX and not retried, its 5xx and network errors
GW_5XX, a timeout GW_TIMEOUT (both retried with the design's backoff,
``RETRY_BASE_DELAY_MS · 2ⁿ + random(0, RETRY_JITTER_MAX_MS)``). A result that
cannot be written is IO_ERROR, retried once. A retry that finds the XML
already written succeeds without calling the gateway.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import httpx
from prometheus_client import Histogram

from converter import storage
from converter.codes import CLASSIFIER, message
from converter.settings import Settings
from redrive import (
    AdditiveJitter,
    App,
    BreakerMode,
    BreakerPolicy,
    Dependency,
    Permanent,
    Transient,
    add_context,
    current_job,
)
from redrive.metrics import BUCKETS, Metrics

# How long the gateway takes to answer; registered with redrive's metrics
# when the worker serves them (serve_metrics).
GATEWAY_LATENCY = Histogram("converter_gateway_request_seconds", "How long the gateway took to answer a conversion.",
                            buckets=BUCKETS, registry=None)


def serve_metrics(app: App, port: int) -> None:
    """redrive's metrics and the gateway's latency, on ``port`` (0: any free one)."""
    metrics = Metrics(app)
    metrics.registry.register(GATEWAY_LATENCY)
    server = metrics.serve(port)
    logging.getLogger("converter").info("metrics at http://127.0.0.1:%d/metrics", server.server_port)


def make_app(settings: Settings) -> App:
    def gateway_healthy() -> bool:
        return httpx.get(f"{settings.gateway_url}/health", timeout=2).status_code == 200

    gateway = Dependency(
        "gateway",
        policy=BreakerPolicy(failure_rate=settings.circuit_fail_threshold, window_calls=settings.circuit_window,
                             min_calls=min(10, settings.circuit_window),
                             wait=timedelta(milliseconds=settings.circuit_cooldown_ms)),
        mode=BreakerMode.HOLD if settings.circuit_mode == "hold" else BreakerMode.FAIL_FAST,
        # fail-fast marks a dispatch failed at once (GW_5XX), not retried later
        fail_code="GW_5XX", fail_for_good=True, probe=gateway_healthy,
        probe_interval=timedelta(milliseconds=min(5000, settings.circuit_cooldown_ms)),
    )
    app = App(settings.database_url, dependencies=[gateway], classifier=CLASSIFIER)

    def already_converted(source: str, mapping: str, **_: Any) -> dict[str, Any] | None:
        found = storage.result_path(settings, source, mapping)
        return {"result": found.name, "reused": True} if found.is_file() else None

    @app.task(dependencies=["gateway"], max_attempts=settings.retry_max_attempts,
              backoff=AdditiveJitter(initial=timedelta(milliseconds=settings.retry_base_delay_ms), multiplier=2.0,
                                     jitter=timedelta(milliseconds=settings.retry_jitter_max_ms)),
              already_done=already_converted)
    def convert(source: str, mapping: str, filename: str = "") -> dict[str, Any]:
        try:
            pdf = storage.source_path(settings, source).read_bytes()
        except OSError as exc:
            raise Transient(f"cannot read the upload: {exc.strerror}", code="IO_ERROR") from None
        add_context(mapping=mapping, size=len(pdf))
        with GATEWAY_LATENCY.time():
            answer = httpx.post(f"{settings.gateway_url}/convert", content=pdf,
                                params={"mapping": mapping, "key": str(current_job().id)},
                                timeout=settings.gateway_timeout_ms / 1000)
        add_context(gateway_http_status=answer.status_code)  # on the job's event, success or not
        answer.raise_for_status()  # the classifier reads the status
        try:
            storage.write_atomically(storage.result_path(settings, source, mapping), answer.text)
        except OSError as exc:
            why = f"cannot write the result: {exc.strerror}"
            # Retried once: a second failure in a row is not a blip (a full disk, a permission)
            raise (Permanent(why, code="IO_ERROR") if current_job().last_error_code == "IO_ERROR"
                   else Transient(why, code="IO_ERROR")) from None
        return {"result": storage.result_name(source, mapping), "pages": answer.text.count("<page ")}

    @app.task(max_attempts=1)
    def refused(filename: str, code: str) -> None:
        """An upload refused at the door (NOT_PDF), on record as the user's failed
        job. It needs no gateway, so no breaker holds it; the service shows it
        failed from the start (web.py), and a worker writes that down."""
        raise Permanent(message(code), code=code)

    return app
