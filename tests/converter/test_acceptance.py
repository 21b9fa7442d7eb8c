"""The converter's acceptance checks, each over HTTP against the running
example (gateway, web service and real worker processes), named after the
check it proves."""

from __future__ import annotations

import itertools
import os
import select
import signal
import socket
import time

import httpx
import pytest
from converter.samples import make_pdf

from redrive import Status
from redrive.testing import wait_for
from tests.converter.conftest import Converter, job_of, upload, wait_status
from tests.examples import BOTH_STORES, refusing_port

PDF = make_pdf("Invoice 42", "Total: 12.00")


def _started(converter: Converter) -> httpx.Client:
    return converter.serve()


def test_upload_a_bad_type_fails_the_job_with_NOT_PDF_and_400(converter: Converter) -> None:
    user = _started(converter)
    answer = user.post("/api/upload", files={"file": ("report.pdf", b"MZ\x90\x00 not a pdf at all", "application/pdf")},
                       data={"mapping": "invoice"})
    assert answer.status_code == 400
    assert answer.json()["error"] == {"code": "NOT_PDF", "message": "Only PDF files are supported."}
    # The refused upload is on record as a failed job at once, no worker needed
    job = job_of(user, answer.json()["job"]["id"])
    assert (job["status"], job["error_code"]) == ("failed", "NOT_PDF")
    # Nor can it be retried, and a worker writes it down failed, whatever the gateway's breaker does
    retried = user.post(f"/api/jobs/{job['id']}/retry")
    assert retried.status_code == 409 and retried.json()["error"]["code"] == "NOT_PDF"
    operator = converter.operator()
    operator.open_breaker("gateway")
    converter.worker()
    wait_for(lambda: operator.job(job["id"]).status is Status.FAILED, timeout=30, what="the record written failed")
    assert operator.job(job["id"]).error_code == "NOT_PDF"
    job = wait_status(user, answer.json()["job"]["id"], "failed")
    assert (job["error_code"], job["error_message"]) == ("NOT_PDF", "Only PDF files are supported.")
    assert job["filename"] == "report.pdf"
    assert converter.calls() == []  # nothing reached the gateway
    assert not any((converter.tmp / "uploads").glob("*.pdf"))


def test_upload_over_50_MB_is_413_TOO_LARGE_refused_while_streaming(converter: Converter) -> None:
    _started(converter)
    host, port = converter.web_url.removeprefix("http://").split(":")
    boundary = "b0undary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.pdf\"\r\n"
            f"Content-Type: application/pdf\r\n\r\n").encode()
    total = 100 * 1024 * 1024  # more than the limit and the kernel's buffers on loopback hold together
    sent, answer = 0, b""
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(f"POST /api/upload HTTP/1.1\r\nHost: {host}\r\nContent-Type: multipart/form-data; "
                     f"boundary={boundary}\r\nContent-Length: {total}\r\n\r\n".encode() + head + b"%PDF-1.4\n")
        chunk = b"0" * (256 * 1024)
        # Send while the server reads and stop at its first byte of answer. No timeout
        # on a send decides that the server stopped reading: under load one once ended
        # the upload early, and the server waited for the rest while this waited for it.
        conn.setblocking(False)
        while sent < total and not answer:
            readable, writable, _ = select.select([conn], [conn], [], 10)
            assert readable or writable, f"the server neither read nor answered for 10 s, {sent:,} bytes in"
            try:
                if readable:
                    answer += conn.recv(65536) or b"(closed)"
                else:
                    sent += conn.send(chunk[:total - sent])
            except (BrokenPipeError, ConnectionResetError):  # the server answered and closed
                break
            except BlockingIOError:
                pass
        conn.setblocking(True)
        conn.settimeout(10)
        while not _whole(answer):
            more = conn.recv(65536)
            if not more:
                break
            answer += more
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'"TOO_LARGE"' in answer and b"File exceeds 50 MB limit." in answer
    # refused while the body still came, not after reading it all: what was handed to the
    # kernel when the answer came is the server's 50 MB and what the sockets' buffers held
    # (here up to 36 MB: 4 sent, 32 received), so it is bounded by the body, not the limit
    assert sent < total, sent
    assert not list((converter.tmp / "uploads").iterdir())  # the partial file is gone


def _whole(answer: bytes) -> bool:
    """Whether ``answer`` holds an HTTP response's headers and all its body."""
    head, found, body = answer.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.lower().split(b"\r\n")
                   if line.startswith(b"content-length:")), None)
    return bool(found) and length is not None and len(body) >= length


def test_gateway_400_or_406_fails_the_job_with_GW_4XX_and_no_retry(converter: Converter) -> None:
    user = _started(converter)
    converter.worker()
    bad_mapping = upload(user, PDF, mapping="no-such-mapping").json()["job"]
    job = wait_status(user, bad_mapping["id"], "failed")
    assert job["error_code"] == "GW_4XX" and job["attempts"] == 1
    assert job["error_message"] == "Couldn’t convert this file with the selected mapping."
    converter.mode("406")
    refused = upload(user, make_pdf("another"), mapping="invoice").json()["job"]
    assert wait_status(user, refused["id"], "failed")["error_code"] == "GW_4XX"
    # Failed is an ending: only an operator's retry leaves it, so no call can follow
    assert [c["status"] for c in converter.calls(bad_mapping["id"])] == [400]
    assert [c["status"] for c in converter.calls(refused["id"])] == [406]


@pytest.mark.slow
def test_gateway_down_keeps_jobs_queued_and_processing_resumes_when_it_recovers(converter: Converter) -> None:
    user = _started(converter)
    converter.worker()
    gateway = converter.procs[0][1]
    os.killpg(gateway.pid, signal.SIGKILL)
    gateway.wait(10)
    port = int(converter.env["GATEWAY_URL"].rsplit(":", 1)[1])
    with refusing_port(port):  # down: its port refuses connections
        jobs = [upload(user, make_pdf(f"doc {n}")).json()["job"]["id"] for n in range(6)]
        # The breaker opens after the window's failures; the rest are held, not failed
        wait_for(lambda: 'Converter busy — jobs will resume automatically' in user.get("/").text, timeout=30,
                 what="the busy banner")
        assert user.get("/api/status").json() == {"gateway_busy": True,
                                                  "message": "Converter busy — jobs will resume automatically"}
        statuses: list[str] = []

        def held() -> bool:  # none running: the open breaker holds them all, retried ones included
            statuses[:] = [job_of(user, j)["status"] for j in jobs]
            return "failed" in statuses or set(statuses) == {"queued"}

        wait_for(held, timeout=30, what="every job held")
        assert "failed" not in statuses and "queued" in statuses, statuses
        converter.gateway()  # back on the same port; the health probe sees it, the breaker closes by itself
    for job in jobs:
        assert wait_status(user, job, "complete", "failed")["status"] == "complete"
    assert "Converter busy" not in user.get("/").text
    assert user.get("/api/status").json() == {"gateway_busy": False, "message": None}


def test_fail_fast_marks_a_new_dispatch_failed_at_once(tmp_path, example_db) -> None:
    converter = Converter(tmp_path, example_db, CIRCUIT_MODE="fail_fast")
    try:
        user = _started(converter)
        converter.operator().open_breaker("gateway")  # as after a run of GW_5XX
        converter.worker()
        began = time.monotonic()
        job = upload(user, PDF).json()["job"]["id"]
        done = wait_status(user, job, "failed", timeout=30)
        # Then it failed on its first dispatch, without waiting out the retries (15 to 25 s by default)
        assert (done["error_code"], done["attempts"]) == ("GW_5XX", 1)
        assert time.monotonic() - began < 10
        assert converter.calls() == []
    finally:
        converter.stop()


def test_gateway_down_fails_jobs_fast_when_configured(tmp_path, example_db) -> None:
    converter = Converter(tmp_path, example_db, CIRCUIT_MODE="fail_fast")
    try:
        user = _started(converter)
        converter.worker()
        converter.mode("503")
        jobs = [upload(user, make_pdf(f"doc {n}")).json()["job"]["id"] for n in range(8)]
        done = [wait_status(user, j, "failed") for j in jobs]
        assert {d["error_code"] for d in done} == {"GW_5XX"}
        assert "Converter busy" not in user.get("/").text  # nothing is held: nothing will resume
        # Once open, jobs fail without a call: fewer calls than jobs and their retries
        assert len(converter.calls()) < sum(d["attempts"] for d in done)
    finally:
        converter.stop()


def test_a_timeout_is_retried_with_the_backoff_then_fails_with_GW_TIMEOUT(converter: Converter) -> None:
    user = _started(converter)
    converter.mode("hang", hang_s=5)
    converter.worker(GATEWAY_TIMEOUT_MS="500")
    job = upload(user, PDF).json()["job"]["id"]
    done = wait_status(user, job, "failed", timeout=60)
    assert (done["error_code"], done["attempts"]) == ("GW_TIMEOUT", 3)
    calls = [c["at"] for c in converter.calls(job)]
    assert len(calls) == 3
    # delay = base · 2ⁿ + random(0, jitter), n from 0; each gap also holds the 0.5 s timeout and a claim
    for n, gap in enumerate(b - a for a, b in itertools.pairwise(calls)):
        low = 0.4 * 2 ** n + 0.5
        assert low <= gap <= low + 0.2 + 1.5, (n, gap)


def test_an_io_write_failure_is_retried_once_then_fails_with_IO_ERROR(converter: Converter) -> None:
    (converter.tmp / "results").write_text("a file where the results folder should be")
    user = _started(converter)
    converter.worker()
    job = upload(user, PDF).json()["job"]["id"]
    done = wait_status(user, job, "failed")
    assert (done["error_code"], done["attempts"]) == ("IO_ERROR", 2)
    assert done["error_message"] == "Temporary storage issue. We’ll retry."
    assert len(converter.calls(job)) == 2


@pytest.mark.parametrize("mode", ["hold", "fail_fast"])
def test_a_local_disk_error_does_not_count_against_the_gateways_breaker(tmp_path, example_db, mode: str) -> None:
    # Given a healthy gateway and a results folder that cannot be written
    converter = Converter(tmp_path, example_db, CIRCUIT_MODE=mode)
    try:
        (converter.tmp / "results").write_text("a file where the results folder should be")
        user = _started(converter)
        converter.worker()
        # When more jobs than the breaker's window fail with IO_ERROR
        jobs = [upload(user, make_pdf(f"doc {n}")).json()["job"]["id"] for n in range(6)]
        done = [wait_status(user, j, "failed") for j in jobs]
        # Then each failed for its own reason, every call reached the gateway, and its breaker stayed closed
        assert {(d["error_code"], d["attempts"]) for d in done} == {("IO_ERROR", 2)}
        assert len(converter.calls()) == 12
        assert "Converter busy" not in user.get("/").text
        assert "breaker gateway" not in converter.log("worker")
    finally:
        converter.stop()


def test_download_before_complete_is_409_NOT_READY_and_after_retention_404_EXPIRED(converter: Converter) -> None:
    user = _started(converter)
    job = upload(user, PDF).json()["job"]["id"]
    early = user.get(f"/api/jobs/{job}/download")
    assert early.status_code == 409 and early.json()["error"]["code"] == "NOT_READY"
    converter.worker()
    wait_status(user, job, "complete")
    xml = user.get(f"/api/jobs/{job}/download")
    assert xml.status_code == 200 and b'pages="2"' in xml.content and b"Invoice 42" in xml.content
    # Retention passes with everything older than the cut-off
    old = time.time() - 3 * 3600
    for path in (converter.tmp / "results").iterdir():
        os.utime(path, (old, old))
    swept = converter.start("retention", env={"RETENTION_HOURS": "1"})
    assert swept.wait(30) == 0
    late = user.get(f"/api/jobs/{job}/download")
    assert late.status_code == 404 and late.json()["error"] == {
        "code": "EXPIRED", "message": "File was removed by retention. Re-upload to regenerate."}
    # And re-uploading regenerates it: a new job, not the twin whose file is gone
    again = upload(user, PDF)
    assert again.status_code == 201 and again.json()["duplicate"] is False, again.text
    fresh = again.json()["job"]["id"]
    assert fresh != job
    wait_status(user, fresh, "complete")
    assert user.get(f"/api/jobs/{fresh}/download").status_code == 200
    # while the file lasts, another re-upload is a twin whose XML is there
    twin = upload(user, PDF)
    assert twin.status_code == 200 and twin.json()["job"]["status"] == "complete"
    assert user.get(f"/api/jobs/{twin.json()['job']['id']}/download").status_code == 200


def test_manual_retry_requeues_a_failed_job_which_then_completes(converter: Converter) -> None:
    user = _started(converter)
    converter.worker()
    converter.mode("406")
    job = upload(user, PDF).json()["job"]["id"]
    wait_status(user, job, "failed")
    converter.mode("ok")
    again = user.post(f"/api/jobs/{job}/retry")
    assert again.status_code == 200 and again.json()["status"] in ("queued", "processing", "complete")
    assert wait_status(user, job, "complete")["error_code"] is None
    twice = user.post(f"/api/jobs/{job}/retry")
    assert twice.status_code == 409 and twice.json()["error"] == {
        "code": "UNKNOWN", "message": "This conversion is complete: only a failed job can be retried."}
    # The gateway's status is on the success's event, as the design's job events ask
    (ended,) = [e for e in converter.operator().job_events(job) if e.to_status is Status.SUCCEEDED]
    assert ended.meta["context"]["gateway_http_status"] == 200 and "duration_ms" in ended.meta


def test_manual_retry_is_only_for_the_owner_and_only_while_the_source_exists(converter: Converter) -> None:
    user = _started(converter)
    converter.worker()
    converter.mode("406")
    job = upload(user, PDF).json()["job"]["id"]
    wait_status(user, job, "failed")
    stranger = converter.browser()
    for path in (f"/api/jobs/{job}", f"/api/jobs/{job}/download"):
        refused = stranger.get(path)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "FORBIDDEN"
    assert stranger.post(f"/api/jobs/{job}/retry").status_code == 403
    assert job_of(user, job)["status"] == "failed"
    for source in (converter.tmp / "uploads").glob("*.pdf"):
        source.unlink()
    gone = user.post(f"/api/jobs/{job}/retry")
    assert gone.status_code == 410 and gone.json()["error"]["code"] == "EXPIRED"
    nothing = user.post("/api/jobs/0190a0b1-0000-7000-8000-000000000000/retry")
    assert nothing.status_code == 404 and nothing.json()["error"] == {
        "code": "EXPIRED", "message": "No such job: it never existed, or retention removed it."}
    for path in ("/api/jobs/not-a-job-id", "/api/jobs/not-a-job-id/download"):
        assert user.get(path).json()["error"]["code"] == "EXPIRED"
    assert job_of(user, job)["status"] == "failed"
    page = user.get("/").text
    assert "disabled" in page  # the queue page's Retry is disabled too
    assert "Couldn’t convert this file with the selected mapping." in page and "Traceback" not in page


@pytest.mark.slow
@BOTH_STORES
def test_a_worker_killed_mid_run_writes_no_second_xml_and_its_lease_is_recovered(converter: Converter) -> None:
    user = _started(converter)
    converter.mode("hang", hang_s=4)
    doomed = converter.worker(WORKER_LEASE_TTL_SEC="2", GATEWAY_TIMEOUT_MS="20000")
    job = upload(user, PDF).json()["job"]["id"]
    wait_for(lambda: len(converter.calls(job)) == 1, timeout=30, what="the first call")
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait(10)
    converter.mode("ok")
    converter.worker(WORKER_LEASE_TTL_SEC="2")
    done = wait_status(user, job, "complete", "failed", timeout=60)
    assert done["status"] == "complete"
    assert len(list((converter.tmp / "results").glob("*.xml"))) == 1
    assert not list((converter.tmp / "results").glob(".*partial"))
    assert len(converter.calls(job)) == 2  # the killed run's call, and the one that finished


def test_the_same_upload_twice_is_one_job(converter: Converter) -> None:
    user = _started(converter)
    first = upload(user, PDF)
    second = upload(user, PDF)
    assert (first.status_code, second.status_code) == (201, 200) and second.json()["duplicate"]
    assert first.json()["job"]["id"] == second.json()["job"]["id"]
    other_mapping = upload(user, PDF, mapping="receipt")
    assert other_mapping.status_code == 201 and other_mapping.json()["job"]["id"] != first.json()["job"]["id"]


def test_the_logs_and_metrics_the_design_names_are_produced(converter: Converter) -> None:
    import json
    import re

    from prometheus_client.parser import text_string_to_metric_families

    user = _started(converter)
    converter.worker(METRICS_PORT="0")
    fine = upload(user, PDF).json()["job"]["id"]
    bad = upload(user, make_pdf("x"), mapping="no-such-mapping").json()["job"]["id"]
    wait_status(user, fine, "complete")
    wait_status(user, bad, "failed")
    wait_for(lambda: "metrics at http://" in converter.log("worker"), timeout=30, what="the metrics address")
    url = re.search(r"metrics at (http://\S+/metrics)", converter.log("worker")).group(1)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(httpx.get(url, timeout=5).text) for s in f.samples}

    def total(name: str, **labels: str) -> float:
        return sum(v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items())

    assert total("redrive_jobs_completed_total", outcome="succeeded") == 1
    assert total("redrive_jobs_completed_total", outcome="failed", error_code="GW_4XX") == 1
    assert total("converter_gateway_request_seconds_count") == 2
    assert ("redrive_breaker_open_seconds", (("dependency", "gateway"),)) in samples
    assert total("redrive_queue_jobs") == 0 and total("redrive_job_duration_seconds_count") == 2
    def lines() -> list[dict]:
        return [json.loads(line) for line in converter.log("worker").splitlines() if line.startswith("{")]

    # Event lines are written in batches, at most 0.1 s after the event
    wait_for(lambda: {(p.get("event"), p.get("job_id")) for p in lines()} >= {("job.succeeded", fine),
                                                                         ("job.failed", bad)}, timeout=30, what="the log lines")
    succeeded = next(p for p in lines() if p.get("event") == "job.succeeded" and p["job_id"] == fine)
    assert succeeded["status"] == "succeeded" and succeeded["attempt"] == 1 and succeeded["duration_ms"] > 0
    failed = next(p for p in lines() if p.get("event") == "job.failed" and p["job_id"] == bad)
    assert (failed["error_code"], failed["upstream_status"], failed["status"]) == ("GW_4XX", 400, "failed")


def test_an_upload_that_cannot_be_stored_is_500_IO_ERROR(tmp_path, example_db) -> None:
    (tmp_path / "uploads").write_text("a file where the uploads folder should be")
    converter = Converter(tmp_path, example_db)
    try:
        user = _started(converter)
        answer = upload(user, PDF)
        assert answer.status_code == 500 and answer.json()["error"] == {
            "code": "IO_ERROR", "message": "Temporary storage issue. We’ll retry."}
        assert user.get("/api/jobs").json()["items"] == []  # no job for an upload that was not stored
    finally:
        converter.stop()


@BOTH_STORES
def test_no_duplicate_processing_with_two_workers(converter: Converter) -> None:
    user = _started(converter)
    converter.worker()
    converter.worker()
    jobs = [upload(user, make_pdf(f"page of document {n}")).json()["job"]["id"] for n in range(16)]
    for job in jobs:
        wait_status(user, job, "complete")
    assert sorted(c["key"] for c in converter.calls()) == sorted(jobs)  # each converted once
    assert len(list((converter.tmp / "results").glob("*.xml"))) == 16


def test_sigterm_during_processing_lets_the_running_conversion_complete(converter: Converter) -> None:
    user = _started(converter)
    converter.mode("hang", hang_s=2)
    worker = converter.worker()
    job = upload(user, PDF).json()["job"]["id"]
    wait_for(lambda: len(converter.calls(job)) == 1, timeout=30, what="the call")
    os.killpg(worker.pid, signal.SIGTERM)
    assert worker.wait(30) == 0  # it finished the conversion first, then stopped
    assert job_of(user, job)["status"] == "complete" and len(converter.calls(job)) == 1


def test_a_gateway_502_is_retried_with_spacing_and_then_completes(converter: Converter) -> None:
    user = _started(converter)
    converter.mode("502")
    converter.worker()
    job = upload(user, PDF).json()["job"]["id"]
    wait_for(lambda: len(converter.calls(job)) == 1, timeout=30, what="the first call")
    converter.mode("ok")
    done = wait_status(user, job, "complete")
    calls = converter.calls(job)
    assert [c["status"] for c in calls] == [502, 200] and done["attempts"] == 2
    # The spacing the policy chose (base · 2⁰ + random(0, jitter)), and the
    # retry claimed no sooner, both on the database's clock; when a worker
    # got to it after that is the machine's business, not the policy's
    events = converter.operator().job_events(job)
    (retry,) = [e for e in events if e.from_status is Status.RUNNING and e.attempt == 1]
    assert retry.meta["error_code"] == "GW_5XX" and 400 <= retry.meta["delay_ms"] <= 400 + 200, retry.meta
    (second,) = [e for e in events if e.to_status is Status.RUNNING and e.attempt == 2]
    assert (second.at - retry.at).total_seconds() >= retry.meta["delay_ms"] / 1000 - 0.001
    assert calls[1]["at"] - calls[0]["at"] >= 0.4  # and the gateway heard it no sooner


def test_a_retry_that_finds_the_xml_already_written_succeeds_without_calling_the_gateway(converter: Converter) -> None:
    import hashlib

    from converter.storage import result_name

    user = _started(converter)
    job = upload(user, PDF).json()["job"]["id"]
    # As if an earlier attempt wrote the XML and died before recording its success
    written = converter.tmp / "results" / result_name(f"{hashlib.sha256(PDF).hexdigest()}.pdf", "invoice")
    written.parent.mkdir(parents=True)
    written.write_text('<?xml version="1.0"?>\n<document mapping="invoice" pages="2"></document>\n')
    converter.worker()
    assert wait_status(user, job, "complete")["status"] == "complete"
    assert converter.calls(job) == []  # found done: the gateway was not called
    assert user.get(f"/api/jobs/{job}/download").text == written.read_text()


@pytest.mark.postgres
def test_a_worker_on_an_unmigrated_database_says_so_in_one_line(tmp_path, pg_empty_url) -> None:
    converter = Converter(tmp_path, pg_empty_url)
    try:
        worker = converter.worker()
        assert worker.wait(30) == 2
        said = converter.log("worker").strip()
        assert said.startswith("converter: ") and "redrive migrate" in said and "\n" not in said, said
        assert "Traceback" not in said
    finally:
        converter.stop()
