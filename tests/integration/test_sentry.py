"""Jobs that fail for good reported to Sentry from a real worker process
(``REDRIVE_SENTRY_DSN``), to a local stand-in for Sentry's ingestion
endpoint: one event a job, tagged and grouped by task and error code, with
the dead letter's redacted context, and no planted secret anywhere in what
was sent."""

from __future__ import annotations

import time

from redrive import Client, JobRequest, Settings, Status
from redrive.testing import wait_for
from tests.apps.alerting import app as alerting
from tests.canaries import CANARIES, leaked
from tests.fakes.sentry import sentry_ingest
from tests.integration.processes import WorkerProcess


def test_a_job_that_fails_for_good_is_one_tagged_sentry_event_with_no_secret(db_url, tmp_path, workers) -> None:
    with sentry_ingest() as sentry:
        worker = WorkerProcess(db_url, tmp_path, "-c", "4", "--poll-interval", "0.1", app="tests.apps.alerting:app",
                               env={"REDRIVE_SENTRY_DSN": sentry.dsn})
        workers.append(worker)
        client = Client(alerting.registry, settings=Settings.load(database_url=db_url))
        doomed = [r.job.id for r in client.enqueue_many(
            [JobRequest("doomed", args=[f"invoice-{n}.pdf", " ".join(CANARIES)], owner="tenant-7")
             for n in range(2)])]
        fine = client.enqueue_many([JobRequest("fine", args=[1])])[0].job.id
        wait_for(lambda: len(sentry.events) == 2, timeout=60, what="two Sentry events")
        time.sleep(1)  # a window, not a wait: a third event (the success, a duplicate) would come by then
        assert len(sentry.events) == 2
        assert all(client.job(j).status is Status.FAILED for j in doomed)
        assert client.job(fine).status is Status.SUCCEEDED
        for event in sentry.events:
            assert event["level"] == "error"
            assert event["message"] == "job doomed failed for good: BAD_INPUT"
            assert {"redrive.task": "doomed", "redrive.queue": "default", "redrive.error_code": "BAD_INPUT",
                    "redrive.owner": "tenant-7", "redrive.attempt": "1"}.items() <= event["tags"].items()
            assert event["fingerprint"] == ["redrive", "doomed", "BAD_INPUT"]
            context = event["contexts"]["redrive job"]
            assert context["job_id"] in {str(j) for j in doomed} and "payload_sha256" in context["context"]
        assert {e["contexts"]["redrive job"]["job_id"] for e in sentry.events} == {str(j) for j in doomed}
        # Nothing planted in the arguments or the error message reached Sentry, nor the DSN's key
        for body in sentry.raw:
            assert not leaked(body.decode(errors="replace")), leaked(body.decode(errors="replace"))
        worker.stop()
        client.close()
