"""How far a running job got, as it last said (``redrive.progress``): a
fraction, or a count done out of a total, and a short note. The store keeps
the latest, written at most once a second per job, so a tight loop that
reports every item does not write every item.

Pure: the value and its checks; the worker throttles, the store keeps it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from redrive.core.redact import redact_text
from redrive.errors import ConfigError

EVERY_S = 1.0  # at most one write a second per job
NOTE_LIMIT = 200


@dataclass(frozen=True, slots=True)
class Progress:
    fraction: float | None = None
    done: int | None = None
    total: int | None = None
    note: str | None = None
    at: datetime | None = None  # when the store wrote it, on its clock

    @property
    def share(self) -> float | None:
        """The fraction said, else done out of total (None if neither is known)."""
        if self.fraction is not None:
            return self.fraction
        if self.done is not None and self.total:
            return min(self.done / self.total, 1.0)
        return None

    def stored(self) -> dict[str, Any]:
        return {"fraction": self.fraction, "done": self.done, "total": self.total, "note": self.note}


def progress(fraction: float | None = None, *, done: int | None = None, total: int | None = None,
             note: str | None = None) -> Progress:
    """A job's progress, checked: a fraction from 0 to 1, or whole counts
    (done no more than total), and a one-line note (redacted, cut at 200)."""
    if fraction is None and done is None and note is None:
        raise ConfigError("progress() needs a fraction, done (and total), or a note")
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 <= fraction <= 1:
            raise ConfigError(f"a progress fraction is a number from 0 to 1, not {fraction!r}")
        fraction = float(fraction)
    for name, value in (("done", done), ("total", total)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ConfigError(f"progress {name} is a whole number of at least 0, not {value!r}")
    if total is not None and done is None:
        raise ConfigError("progress total= goes with done=")
    if done is not None and total is not None and done > total:
        raise ConfigError(f"progress done ({done}) is more than total ({total})")
    if note is not None:
        if not isinstance(note, str):
            raise ConfigError("a progress note is text")
        note = redact_text(" ".join(note.split()))[:NOTE_LIMIT] or None
    return Progress(fraction, done, total, note)


def loaded(value: dict[str, Any], at: datetime | None) -> Progress:
    """A stored progress, as read back."""
    return Progress(value.get("fraction"), value.get("done"), value.get("total"), value.get("note"), at)
