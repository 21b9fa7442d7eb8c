"""The stack a dead letter keeps: the task's own frames, not the engine's,
with paths an operator can read (relative to the project, or to the
installed package), redacted and cut from the top, where the failing frame
is not."""

from __future__ import annotations

import os
import sysconfig
import traceback
from pathlib import Path

STACK_LIMIT = 8000  # characters kept from the end, where the failing frame is

_ENGINE = str(Path(__file__).resolve().parents[1])  # the redrive package
_STDLIB = {str(Path(sysconfig.get_paths()[name]).resolve()) for name in ("stdlib", "platstdlib")}
# The machinery between the worker and a task: never what an operator is after.
_PLUMBING = ("asyncio", "concurrent", "threading.py", "contextvars")


def task_stack(exc: BaseException) -> str:
    """The formatted exception with engine and event-loop frames left out and
    short paths: ``tasks/convert.py``, ``httpx/_client.py``."""
    summary = traceback.TracebackException.from_exception(exc)
    _trim(summary, os.getcwd(), set())
    return "".join(summary.format())


def _trim(summary: traceback.TracebackException, project: str, seen: set[int]) -> None:
    if id(summary) in seen:
        return
    seen.add(id(summary))
    # a task of redrive's own (the demo's) has only engine frames: keep where it raised
    frames = [f for f in summary.stack if _is_task_frame(f.filename)] or list(summary.stack[-1:])
    summary.stack = traceback.StackSummary.from_list([_shortened(f, project) for f in frames])
    for linked in (summary.__cause__, summary.__context__):
        if linked is not None:
            _trim(linked, project, seen)


def _is_task_frame(filename: str) -> bool:
    path = str(Path(filename).resolve()) if os.path.isabs(filename) else filename
    if path.startswith(_ENGINE):
        return False
    return not any(path.startswith(root) and any(part in path[len(root):] for part in _PLUMBING)
                   for root in _STDLIB)


def _shortened(frame: traceback.FrameSummary, project: str) -> traceback.FrameSummary:
    filename = frame.filename
    if filename.startswith(_ENGINE + os.sep):
        filename = "redrive" + os.sep + filename[len(_ENGINE) + 1:]
    elif filename.startswith(project + os.sep):
        filename = filename[len(project) + 1:]
    elif "site-packages" + os.sep in filename:
        filename = filename.split("site-packages" + os.sep, 1)[1]
    else:
        for root in sorted(_STDLIB, key=len, reverse=True):
            if filename.startswith(root + os.sep):
                filename = "python" + os.sep + filename[len(root) + 1:]
                break
        else:  # outside the project: its name is enough, the server's layout is nobody's business
            filename = os.path.basename(filename)
    return traceback.FrameSummary(filename, frame.lineno, frame.name, line=frame.line)
