"""The store conformance suite (redrive.testing.suite) on every store of
redrive's: memory, SQLite and PostgreSQL (fixtures in conftest.py)."""

from redrive.testing.suite import *  # noqa: F403
