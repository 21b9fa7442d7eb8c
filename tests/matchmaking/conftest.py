"""The matchmaking example: its workers as processes of their own, its
schedulers in the test process with a clock the test moves."""

from __future__ import annotations

import sys

from tests.examples import REPO

sys.path.insert(0, str(REPO / "examples" / "matchmaking"))
