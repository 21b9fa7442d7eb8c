"""The example's kept connections (one a thread, reused between jobs) are
closed when their thread or the process ends, or when the URL changes: none
is left for the interpreter to find open as it exits."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.examples import REPO

_PROGRAM = textwrap.dedent("""
    import sys, threading
    from matchmaking.db import connection

    pg, lite = sys.argv[1], sys.argv[2]

    def use(url):
        with connection(url) as db:
            assert db.one("SELECT 1 AS one")["one"] == 1

    use(pg)
    use(lite)  # another URL: the kept PostgreSQL connection goes
    use(pg)
    worker = threading.Thread(target=use, args=(pg,))
    worker.start()
    worker.join()  # the thread's own connection goes with it
    print("done")
""")


def test_kept_connections_are_closed_with_their_thread_the_process_or_a_new_url(pg_url: str, tmp_path: Path) -> None:
    run = subprocess.run(
        # -X dev shows the ResourceWarning a connection deleted while open gives
        [sys.executable, "-X", "dev", "-c", _PROGRAM, pg_url, f"sqlite:///{tmp_path / 'app.db'}"],
        capture_output=True, text=True, timeout=60, cwd=REPO / "examples" / "matchmaking",
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "done"
    assert "ResourceWarning" not in run.stderr, run.stderr
