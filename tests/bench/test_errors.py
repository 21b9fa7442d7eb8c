"""How the benchmark fails: in one line, without a traceback, leaving no report
and no worker process behind. Bad arguments fail before anything runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import _writable
from bench.harness import ROOT
from redrive.testing import wait_for


def bench(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("args", "says"), [
    (["--systems", "redrive-pg,nosuch"], "unknown system 'nosuch' (choose from floor-pgbench, floor-psycopg, "
     "floor-jobtable, floor-store-pg, floor-store-sqlite, redrive-pg, redrive-pg-minimal, redrive-pg-observed, "
     "pgqueuer, procrastinate, celery, redrive-sqlite, bare-sqlite, huey, redrive-sqlite-normal)"),
    (["--systems", ","], "name at least one system"),
    (["--systems", "bare-sqlite,bare-sqlite"], "a system is named twice"),
    (["--repeats", "0"], "expected a whole number of at least 1, got '0'"),
    (["--repeats", "many"], "expected a whole number of at least 1, got 'many'"),
])
def test_a_bad_argument_is_refused_with_a_usage_error(args: list[str], says: str) -> None:
    run = bench(*args)
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.splitlines()[-1] == f"bench: error: argument {args[0]}: {says}"
    assert "Traceback" not in run.stderr


def test_a_report_that_cannot_be_written_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    taken = tmp_path / "a-directory"
    taken.mkdir()
    run = bench("--systems", "bare-sqlite", "--out", str(taken))
    assert run.returncode == 1
    assert run.stderr == f"bench: cannot write the report to {taken}: Is a directory\n"
    assert run.stdout == ""  # nothing measured


def test_a_report_under_a_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    under_a_file = tmp_path / "file"
    under_a_file.write_text("")
    run = bench("--systems", "bare-sqlite", "--out", str(under_a_file / "report.md"))
    assert run.returncode == 1
    assert run.stderr == f"bench: cannot write the report to {under_a_file / 'report.md'}: {under_a_file} is not a directory\n"


def test_checking_a_writable_report_path_leaves_no_file_behind(tmp_path: Path) -> None:
    out = tmp_path / "new" / "report.md"
    _writable(out)
    assert out.parent.is_dir() and not out.exists()


def test_an_unreachable_postgresql_stops_the_run_with_one_line(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    run = bench("--systems", "redrive-pg", "--profile", "smoke", "--out", str(out),
                BENCH_PG="postgresql://postgres@127.0.0.1:1")  # nothing listens on port 1
    assert run.returncode == 1
    last = run.stderr.splitlines()[-1]
    assert last.startswith("bench: cannot set up database bench_redrive on postgresql://postgres@127.0.0.1:1"
                           " (BENCH_PG): connection failed:"), last
    assert "Traceback" not in run.stderr
    assert not out.exists()


def test_an_interrupted_run_stops_its_workers_and_writes_no_report(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    run = subprocess.Popen(
        [sys.executable, "-m", "bench", "--systems", "bare-sqlite", "--out", str(out)],
        cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp_path)},  # its work directory, and its workers' paths
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A shell runs background jobs with SIGINT ignored, and Python then
        # installs no KeyboardInterrupt: give the run the default, as a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        wait_for(lambda: _workers_under(tmp_path) or run.poll() is not None, timeout=60, every=0.05,
                 what="a bench worker starting")
        assert run.poll() is None, "the run ended before any worker started"
        run.send_signal(signal.SIGINT)
        _, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130
    assert stderr.splitlines()[-1] == "bench: interrupted, no report written"
    assert "Traceback" not in stderr
    assert not out.exists()
    assert not _workers_under(tmp_path)
    assert not list(tmp_path.glob("redrive-bench-*"))  # its work directory is gone too


def _workers_under(path: Path) -> list[int]:
    """Benchmark worker processes whose command line names a file under ``path``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
        except OSError:  # it exited meanwhile
            continue
        if b"bench.worker" in argv and str(path).encode() in argv:
            found.append(int(proc.name))
    return found
