"""The ``redrive`` command: worker, serve, scheduler, enqueue, jobs, dead,
queues, workers, breakers, migrate, prune, verify. Each module of this
package adds its own subcommands (``add_commands``); adding a command
group is a module and one line in ``_GROUPS``.

Every error redrive knows about ends as one line, ``redrive: error [CODE]:
message``, and exit status 2; never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dotenv import find_dotenv, load_dotenv

from redrive import logs, signals
from redrive.cli import dead, jobs, ops, run, workflows
from redrive.cli.load import load_app
from redrive.cli.parsing import Commands, Version, common
from redrive.core.redact import redact_text
from redrive.errors import RedriveError
from redrive.settings import Settings

__all__ = ["EXIT_ERROR", "load_app", "main"]

EXIT_ERROR = 2
_GROUPS = (run, jobs, workflows, dead, ops)


def main(argv: Sequence[str] | None = None) -> int:
    signals.hold_stops()  # from the console script; `python -m redrive` held them earlier
    # A .env file where the command runs fills what the environment leaves out.
    load_dotenv(find_dotenv(usecwd=True), override=False)
    args = _parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # a supervisor starts its children with them
    if args.command not in ("worker", "serve"):
        signals.release_stops()
    if getattr(args, "app_path", None):  # `redrive worker myapp.tasks:app`
        args.app = args.app_path
    try:
        # Every REDRIVE_ variable, read and checked once, before any work, and handed to the command.
        args.settings = Settings.load()
        args.app = args.app or args.settings.app or None
        logs.configure(level=args.log_level, fmt=args.log_format or args.settings.log_format)
        return args.handler(args) or 0
    except RedriveError as exc:
        print(f"redrive: error [{exc.code}]: {redact_text(exc.message)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `redrive jobs list | head`: the reader left; that is not an error.
        sys.stderr.close()
        return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="redrive", description="A reliable background-job engine.")
    parser.add_argument("--version", action=Version)
    common(parser, top=True)
    commands = Commands(parser)
    for group in _GROUPS:
        group.add_commands(commands)
    return parser
