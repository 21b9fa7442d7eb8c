"""The conformance suite works from outside this repository, as its
docstring tells a store author: a test module of their own, their fixtures,
and the suite imported (here with the memory store standing in for theirs)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

MODULE = '''
import pytest
from redrive import MemoryStore
from redrive.testing import Clock
from redrive.testing.suite import *  # noqa: F403


@pytest.fixture
def store():
    return MemoryStore()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def timed_store(clock):
    return MemoryStore(clock=clock)


@pytest.fixture
def reopen():
    return lambda store: store  # one process: the same store
'''


@pytest.mark.slow  # 8 s or more under the suite's load: CI runs it, --quick does not
def test_a_store_author_runs_the_whole_suite_with_four_fixtures(tmp_path) -> None:
    (tmp_path / "test_my_store.py").write_text(MODULE)
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_my_store.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    last = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout[-3000:]
    passed = int(last.split(" passed")[0].split()[-1])
    assert passed >= 70 and "failed" not in last, last
