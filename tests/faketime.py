"""A Python program under Debian's faketime, with ``time.sleep`` that works:
``faketime -f +300s python -m tests.faketime python -m redrive worker ...``
runs ``redrive worker ...`` in this process (the conftest's ``faketime``
fixture builds that command).

A host whose clock is off has its wall clock moved, not its monotonic one, so
faketime runs with FAKETIME_DONT_FAKE_MONOTONIC (otherwise a Python thread's
timed wait, which reads the faked monotonic clock and waits on the real one,
waits the offset longer). libfaketime 0.9.10 then fails every
``clock_nanosleep`` with an absolute monotonic deadline (EINVAL), which is how
``time.sleep`` sleeps since Python 3.11: here it sleeps through ``select``."""

from __future__ import annotations

import runpy
import select
import sys
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [], left)


if __name__ == "__main__":
    time.sleep = _sleep
    _, flag, module, *rest = sys.argv[1:]  # python -m MODULE ARGS
    assert flag == "-m", sys.argv
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
