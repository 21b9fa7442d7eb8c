"""Running the ``redrive`` command in a test: in this process, through the
entry function the console script calls (``redrive.cli.main``), where the
test is about what the command parses, does and prints; or as a process of
its own, where the process is the point (workers, signals, ``verify``).
Both answer with the exit status and what was printed."""

from __future__ import annotations

import gc
import io
import logging
import os
import signal
import subprocess
import sys
from contextlib import chdir, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
APPS = "tests.apps."  # the apps the tests' commands load


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def redrive(*args: str, url: str | None = None) -> Ran:
    """``redrive ARGS`` in this process, from the repository's directory, with
    REDRIVE_DATABASE_URL set to ``url`` or unset. What the command changes of
    the process (the environment, signals, logging, the garbage collector) is put
    back after it."""
    from redrive import App
    from redrive.cli import main

    # An app module reads the environment when imported, as in a process of
    # its own: those this process imported before are set aside meanwhile.
    saved_apps = {name: sys.modules.pop(name) for name in list(sys.modules) if name.startswith(APPS)}
    saved_env = os.environ.copy()
    saved_term = signal.getsignal(signal.SIGTERM)
    saved_gc = gc.get_threshold()
    root = logging.getLogger()
    saved_logging = (root.handlers[:], root.level, logging._srcfile)
    os.environ.pop("REDRIVE_DATABASE_URL", None)
    if url:
        os.environ["REDRIVE_DATABASE_URL"] = url
    out, err = io.StringIO(), io.StringIO()
    try:
        with chdir(REPO), redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as stop:  # argparse: a usage error (2), --help or --version (0)
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            for handler in [h for h in root.handlers if h not in saved_logging[0]]:
                handler.flush()  # what the command's log handler still holds is written, as at exit
                handler.close()
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        signal.signal(signal.SIGTERM, saved_term)
        gc.unfreeze()  # a worker freezes what it loaded
        gc.set_threshold(*saved_gc)
        root.handlers[:], root.level, logging._srcfile = saved_logging
        # The app the command loaded: its database is closed, as the process's
        # end would have, and the modules set aside are back.
        for name in [name for name in sys.modules if name.startswith(APPS)]:
            if isinstance(app := getattr(sys.modules.pop(name), "app", None), App):
                app.close()
        sys.modules.update(saved_apps)
    return Ran(code, out.getvalue(), err.getvalue())


def redrive_process(*args: str, url: str | None = None, env: dict[str, str] | None = None,
                    timeout: float = 60) -> subprocess.CompletedProcess:
    """``redrive ARGS`` as a process of its own (``python -m redrive``), with
    ``env`` added to this process's environment."""
    full = {**os.environ, "PYTHONPATH": str(REPO)}
    full.pop("REDRIVE_DATABASE_URL", None)
    if url:
        full["REDRIVE_DATABASE_URL"] = url
    return subprocess.run([sys.executable, "-m", "redrive", *args], cwd=REPO, env={**full, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)
