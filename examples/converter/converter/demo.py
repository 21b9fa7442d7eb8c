"""``python -m converter demo``: the converter on SQLite, driven for about a
minute: good PDFs, a file that is not a PDF, one too large, a bad mapping,
then a gateway outage that opens the breaker and holds the jobs until the
gateway is back. Prints what happens as it happens, then stops every
process it started and says where to look closer."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from converter.samples import make_pdf

WORKDIR = Path("converter-demo")
LIMIT_S = 60.0
KNOBS = {  # the design's knobs, scaled so the story fits in a minute
    "RETRY_BASE_DELAY_MS": "1000", "RETRY_JITTER_MAX_MS": "500", "GATEWAY_TIMEOUT_MS": "3000",
    "CIRCUIT_WINDOW": "4", "CIRCUIT_FAIL_THRESHOLD": "50", "CIRCUIT_COOLDOWN_MS": "3000",
    "WORKER_CONCURRENCY": "4", "REDRIVE_WORKER_POLL_INTERVAL": "0.2", "LOG_FORMAT": "text",
}


# What a server part prints once it listens: each takes --port 0 (a port the
# system picks, so the demo never collides with what already runs here) and
# says which port it got.
_LISTENING = re.compile(r"http://127\.0\.0\.1:[1-9][0-9]*")


class Parts:
    """The gateway, a worker and the web service, each in its own process group."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.database_url = f"sqlite:///{(workdir / 'converter.db').resolve()}"
        # The demo's uploads and a browser opening the queue page share one session,
        # so the page shows the demo's jobs (the web service does this only when told).
        self.session = secrets.token_urlsafe(24)
        self.env = {**os.environ, **KNOBS, "DATABASE_URL": self.database_url,
                    "UPLOADS_DIR": str(workdir / "uploads"), "RESULTS_DIR": str(workdir / "results"),
                    "DEMO_SESSION": self.session}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.web_url = ""

    def start(self) -> None:
        deadline = time.monotonic() + 60
        self.env["GATEWAY_URL"] = self._serve("gateway", deadline)  # the worker calls it
        self._start("worker")
        self.web_url = self._serve("web", deadline)

    def _start(self, part: str, *args: str) -> subprocess.Popen[bytes]:
        with open(self.workdir / f"{part}.log", "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "converter", part, *args], env=self.env,
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def _serve(self, part: str, deadline: float) -> str:
        """Start a part that serves HTTP; its address, once it listens."""
        proc = self._start(part, "--port", "0")
        log = self.workdir / f"{part}.log"
        while (found := _LISTENING.search(log.read_text(errors="replace"))) is None:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the converter did not start: see {self.workdir}/*.log")
            time.sleep(0.1)
        return found.group(0)

    def gateway_mode(self, mode: str) -> None:
        httpx.post(f"{self.env['GATEWAY_URL']}/admin/mode", json={"mode": mode}, timeout=5)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


def _big_upload(size: int) -> Iterator[bytes]:
    boundary = "demo-boundary"
    yield (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"scan-600dpi.pdf\"\r\n"
           f"Content-Type: application/pdf\r\n\r\n%PDF-1.4\n").encode()
    chunk = b"0" * (1024 * 1024)
    for _ in range(size // len(chunk)):
        yield chunk
    yield f"\r\n--{boundary}--\r\n".encode()


class Story:
    """The uploads, and what the user would see happen to them."""

    def __init__(self, user: httpx.Client, started: float) -> None:
        self.user, self.started = user, started
        self.seen: dict[str, str] = {}
        self.names: dict[str, str] = {}
        self.busy = False

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:5.1f}s] {text}", flush=True)

    def upload(self, name: str, body: bytes, mapping: str = "invoice") -> None:
        answer = self.user.post("/api/upload", files={"file": (name, body, "application/pdf")},
                                data={"mapping": mapping})
        found = answer.json()
        if "job" in found:
            self.names[found["job"]["id"]] = f"{name} ({mapping})"
        if answer.status_code >= 400:
            error = found["error"]
            self.say(f"upload {name}: {answer.status_code} {error['code']}: {error['message']}")
        else:
            self.say(f"upload {name} ({mapping}): job …{found['job']['id'][-8:]} queued")

    def upload_too_large(self) -> None:
        answer = self.user.post("/api/upload", content=_big_upload(51 * 1024 * 1024),
                                headers={"Content-Type": "multipart/form-data; boundary=demo-boundary"})
        error = answer.json()["error"]
        self.say(f"upload scan-600dpi.pdf (51 MB): {answer.status_code} {error['code']}: {error['message']}")

    def watch(self) -> bool:
        """Print what changed; whether every job has ended."""
        jobs = self.user.get("/api/jobs").json()["items"]
        for job in reversed(jobs):
            shown = job["status"] + (f" ({job['retrying']}, will retry)" if job.get("retrying") else "")
            if self.seen.get(job["id"]) != shown:
                self.seen[job["id"]] = shown
                name = self.names.get(job["id"], job["filename"] or "upload")
                detail = f": {job['error_code']} {job['error_message']}" if job["status"] == "failed" else ""
                self.say(f"{name}: {shown}{detail}")
        busy = "Converter busy" in self.user.get("/").text
        if busy != self.busy:
            self.busy = busy
            self.say("the gateway's breaker is open: the queue page says “Converter busy — jobs will resume "
                     "automatically”; jobs wait, queued" if busy else "the breaker closed: held jobs resume")
        return all(job["status"] in ("complete", "failed") for job in jobs)


def run() -> int:
    if WORKDIR.exists():
        shutil.rmtree(WORKDIR)
    WORKDIR.mkdir()
    parts = Parts(WORKDIR)
    started = time.monotonic()
    try:
        parts.start()
        web = parts.web_url
        print(f"converter demo: open {web}/ to watch the queue page (it refreshes itself)", flush=True)
        with httpx.Client(base_url=web, timeout=60, cookies={"converter_session": parts.session}) as user:
            story = Story(user, started)
            for n, mapping in enumerate(("invoice", "receipt", "generic")):
                story.upload(f"invoice-{n + 1}.pdf", make_pdf(f"Invoice {n + 1}", "Total: 12.00"), mapping)
            story.upload("photo.pdf", b"\x89PNG\r\n\x1a\n not a pdf, whatever its name says")
            story.upload_too_large()
            story.upload("contract.pdf", make_pdf("Contract"), mapping="legal-v2")
            outage = restored = None
            while time.monotonic() - started < LIMIT_S:
                settled = story.watch()
                elapsed = time.monotonic() - started
                if outage is None and elapsed > 6:
                    outage = elapsed
                    story.say("the gateway goes down (every call answers 503)")
                    parts.gateway_mode("503")
                    for n in range(4):
                        story.upload(f"report-{n + 1}.pdf", make_pdf(f"Report {n + 1}"))
                elif outage is not None and restored is None and (story.busy or elapsed - outage > 15):
                    if elapsed - outage > 12:
                        restored = elapsed
                        story.say("the gateway is back: its health probe will close the breaker")
                        parts.gateway_mode("ok")
                elif restored is not None and settled:
                    break
                time.sleep(0.5)
            story.watch()
    except KeyboardInterrupt:
        print("\nstopping...", flush=True)
    finally:
        parts.stop()
    print(f"done in {time.monotonic() - started:.0f} s; every process the demo started has stopped.", flush=True)
    command = _redrive_command()
    print(f"look closer: {command} jobs list --database-url {parts.database_url}", flush=True)
    print(f"   the failed: {command} dead list --database-url {parts.database_url}", flush=True)
    print(f"   the logs: {WORKDIR}/*.log", flush=True)
    return 0


def _redrive_command() -> str:
    """redrive's command beside this Python (the demo's virtual environment), as typed from here."""
    found = Path(sys.executable).parent / "redrive"
    if found.is_file() and shutil.which("redrive") == str(found):
        return "redrive"
    relative = os.path.relpath(found)
    return relative if relative.startswith(".") or relative.startswith("/") else f"./{relative}"
