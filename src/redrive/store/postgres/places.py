"""Where each job this store claimed has its row, so that its ending finds
the row there (a TID scan) instead of through the primary key, which holds
two entries for every running job: the claim is not a HOT update, so the
job's old version keeps its entry until vacuum (bench/NOTES.md).

A place is a hint, never trusted alone: the ending matches the id and the
lease token too, and a row that moved since (any update writes a new
version elsewhere) is not found there and is ended by id instead
(``Endings._finish_on``). Only this store's own claims are known here; a
job claimed by another process is ended by id."""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterable
from uuid import UUID

# More running jobs than any worker holds: past it the places are dropped
# (their endings go by id), in case a caller claims and never ends
_MOST = 100_000


class Places:
    """Lease token → the row's ctid, as the database answered it (binary
    from the claim, text from a heartbeat)."""

    def __init__(self) -> None:
        self._at: dict[UUID, bytes | str] = {}
        self._lock = threading.Lock()

    def keep(self, found: Iterable[tuple[UUID, bytes | str]]) -> None:
        with self._lock:
            if len(self._at) > _MOST:
                self._at.clear()
            self._at.update(found)

    def forget(self, tokens: Iterable[UUID]) -> None:
        with self._lock:
            for token in tokens:
                self._at.pop(token, None)

    def take(self, tokens: Iterable[UUID]) -> list[str] | None:
        """The places of ``tokens``, forgotten as they are taken (each lease
        ends once), in text; None unless every one is known."""
        with self._lock:
            found = [self._at.pop(token, None) for token in tokens]
        if not found or None in found:
            return None
        return [_text(place) for place in found if place is not None]

    def __len__(self) -> int:
        return len(self._at)


_TID = struct.Struct(">IH")  # a ctid in binary: the block's four bytes and the offset's two, big-endian
_FORMAT = "({},{})".format


def _text(place: bytes | str) -> str:
    """A ctid as PostgreSQL writes it: "(block,offset)"."""
    if isinstance(place, str):
        return place
    return _FORMAT(*_TID.unpack(place))
