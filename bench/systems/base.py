"""What the harness needs from each system under test."""

from __future__ import annotations

import os
import sys
from typing import Protocol

import psycopg

from bench.harness import BenchError

PG_SERVER = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432")


class System(Protocol):
    name: str

    def reset(self) -> None:
        """An empty queue with a fresh schema."""

    def enqueue(self, n: int, batch: int) -> None:
        """``n`` no-op jobs, ``batch`` per call (1: one call per job)."""

    def enqueue_timed(self, sent_at: float) -> None:
        """One no-op job that reports how long it waited to start."""

    def worker_argv(self) -> list[str]:
        """The command line of one worker process at this system's best setting."""

    def close(self) -> None: ...


def fresh_database(name: str) -> str:
    """Drops and recreates ``name`` on the shared server; returns its URL.
    ``BENCH_DB_SUFFIX`` keeps the test suite's smoke run off a real run's databases."""
    name += os.environ.get("BENCH_DB_SUFFIX", "")
    try:
        with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0]
        raise BenchError(f"cannot set up database {name} on {PG_SERVER} (BENCH_PG): {reason}") from None
    return f"{PG_SERVER}/{name}"


def worker_module(system: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "bench.worker", system, *args]
