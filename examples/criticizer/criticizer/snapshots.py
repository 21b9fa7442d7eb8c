"""Fetched changes, kept by the application rather than in the job.

A stage's output is saved in the job (so a retry or a replay resumes after
it) and the job is what operators see in the API and the CLI. A change's
diff may hold anything (keys, names, plans), so fetch saves it here, under
its SHA-256, and the job keeps only that hash. Written atomically; a
deployment with workers on several machines puts ``SNAPSHOTS_DIR`` on
shared storage.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from redrive import Permanent


def save(directory: Path, change: dict[str, Any]) -> str:
    data = json.dumps(change, sort_keys=True).encode()
    digest = hashlib.sha256(data).hexdigest()
    target = directory / f"{digest}.json"
    if not target.exists():
        directory.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=directory, suffix=".part")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    return digest


def load(directory: Path, digest: str) -> dict[str, Any]:
    try:
        found: dict[str, Any] = json.loads((directory / f"{digest}.json").read_bytes())
    except FileNotFoundError:
        raise Permanent("the fetched change is no longer stored: replay from the start", code="NOT_FOUND") from None
    return found
