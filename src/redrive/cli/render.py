"""How the ``redrive`` command prints: times, durations, records, and the
line that says a list goes on."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from redrive.admin import Bulk
from redrive.core.job import Job
from redrive.store.reads import Page


def when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def took(job: Job) -> str:
    """From its first start to its end (waits between retries included); - until it ends."""
    if job.started_at is None or job.finished_at is None:
        return "-"
    seconds = (job.finished_at - job.started_at).total_seconds()
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:.1f}s" if seconds < 600 else f"{seconds / 60:.0f}m"


def more(page: Page[Any]) -> None:
    """A list is never cut silently: say how to get the next page (on stderr,
    so --json output stays one object per line)."""
    if page.next_cursor is not None:
        print(f"more: repeat with --after {page.next_cursor}", file=sys.stderr)


def record(shown: Mapping[str, Any]) -> None:
    """A record's fields, one a line, the empty ones left out."""
    for name, value in shown.items():
        if value is not None:
            print(f"{name:18} {json.dumps(value) if isinstance(value, (dict, list)) else value}")


def json_lines(records: Any) -> None:
    for shown in records:
        print(json.dumps(shown))


def lines(texts: list[str]) -> None:
    for line in texts:
        print(line)


def bulk_told(done: Bulk, verb: str, what: str) -> None:
    """What an action on every match did: ``what`` is "job" or "open dead letter"."""
    if done.dry_run:
        print(f"{done.matched} {what}{'' if done.matched == 1 else 's'} match: nothing {verb} (--dry-run)")
        return
    noun = what.removeprefix("open ")
    meanwhile = "changed by someone else meanwhile, left alone" if what == "job" else "closed by someone else meanwhile"
    skipped = f" ({done.skipped} {meanwhile})" if done.skipped else ""
    print(f"{verb} {done.done} {noun}{'' if done.done == 1 else 's'}{skipped}")
