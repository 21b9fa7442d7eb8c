"""The server's instructions, counted: ``bench.dbcost --instructions`` runs
the private PostgreSQL under ``valgrind --tool=callgrind``, so what each
phase costs the server is a count of instructions executed, not a time.

CPU time read from ``/proc`` is the machine's hour as much as the work: the
same code's whole job read 0.78 and 0.85 of PgQueuer's in two runs half an
hour apart (bench/NOTES.md). Instructions do not move with the hour. What
they leave out is what a time adds: the kernel's share (writes, sockets)
and how fast each instruction runs (cache misses).

A backend is a fork of the postmaster, so each connection's backend runs
under callgrind and writes its count to a file of its own (``cg.PID``) as it
exits. A phase's count is the files that appeared during it: the meter
closes the system's connections at the phase's end (``Subject.disconnect``)
and waits for their backends to go. Counted so, a phase is the work of the
system's connections, from each one's start to its end; the server's own
processes (WAL writer, checkpointer, background writer) stay out, as they
run until the server stops: their work follows the WAL's bytes, measured
apart.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness import BenchError

_TOTAL = re.compile(r"^(?:totals|summary):\s*(\d+)", re.MULTILINE)


def require() -> None:
    if shutil.which("valgrind") is None:
        raise BenchError("counting instructions needs valgrind (Debian's valgrind package)")


def wrapper(directory: Path, postgres: Path) -> Path:
    """A script that pg_ctl starts in place of ``postgres`` (``pg_ctl -p``):
    the server under callgrind, each process's count in ``directory``."""
    (directory / "callgrind").mkdir()
    shutil.chown(directory / "callgrind", "postgres", "postgres")
    script = directory / "postgres-under-callgrind"
    # A forked child starts with its parent's counts: each backend would count the postmaster's
    # own start and every fork before it. InitPostmasterChild is the first thing a child of the
    # postmaster does (and only a child): counting starts there. No gdbserver (--vgdb=no):
    # nothing talks to the processes while they run.
    script.write_text("#!/bin/sh\nexec valgrind --quiet --tool=callgrind --vgdb=no --zero-before=InitPostmasterChild "
                      f"--callgrind-out-file={directory}/callgrind/cg.%p {postgres} \"$@\"\n")
    script.chmod(0o755)
    return script


class Counter:
    """Instructions of the backends that exited between ``mark`` and ``count``."""

    def __init__(self, directory: Path) -> None:
        self._files = directory / "callgrind"
        self._before: set[Path] = set()

    def mark(self, transient: Callable[[], list[int]]) -> None:
        _settle(transient)
        self._before = set(self._files.glob("cg.*"))

    def count(self, transient: Callable[[], list[int]]) -> int:
        """``transient``: the backends still to exit (the phase's connections
        are closed; each writes its file as it goes)."""
        _settle(transient)
        total = 0
        for left in set(self._files.glob("cg.*")) - self._before:
            found = _TOTAL.search(left.read_text(errors="replace"))
            if found is None:
                raise BenchError(f"callgrind's file {left.name} has no total")
            total += int(found.group(1))
        return total


def _settle(transient: Callable[[], list[int]], timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while left := transient():
        if time.monotonic() > deadline:
            raise BenchError(f"backends {left[:5]} did not exit within {timeout_s:.0f} s")
        time.sleep(0.05)
