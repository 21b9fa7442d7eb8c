"""``python -m bench.worker SYSTEM [ARGS]``: one worker process of a system."""

import importlib
import sys

if __name__ == "__main__":
    module = importlib.import_module(f"bench.systems.{sys.argv[1]}")
    module.work(*sys.argv[2:])
