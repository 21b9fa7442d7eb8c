"""How the ``redrive`` command reads its arguments: the options every
command takes, the argument types (durations, sizes, queues, JSON, times),
and ``Commands``, through which each module of this package adds its own
subcommands."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from redrive.core.durations import parse_duration
from redrive.errors import ConfigError
from redrive.runtime.presence import installed_version

Handler = Callable[[argparse.Namespace], int]


def common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """Options every command takes, before or after its name: on the
    subcommands they default to nothing, so the top-level value stands."""
    unset = None if top else argparse.SUPPRESS
    parser.add_argument("--app", default=unset,
                        help="import path of your App, such as myapp.tasks:app, or myapp.tasks:make_app() "
                             "for a function that builds it: its tasks and its database (REDRIVE_APP)")
    parser.add_argument("--database-url", default=unset,
                        help="the database, over the app's and REDRIVE_DATABASE_URL")
    parser.add_argument("--log-level", default="info" if top else unset,
                        choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default=unset,
                        help="text (for a terminal) or json, one object per line (REDRIVE_LOG_FORMAT)")


class Version(argparse.Action):
    """``--version``: the installed version is read only when asked (reading
    it cost every command about 20 ms)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **_: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show redrive's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"redrive {installed_version()}")
        parser.exit()


class Commands:
    """Where a module of this package adds its subcommands: ``command`` for a
    top-level one (``group`` for one with subcommands of its own), each
    taking the common options and run by its handler."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self._under = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(self, name: str, handler: Handler, help: str, under: Any = None) -> argparse.ArgumentParser:
        """A command; an operator verb works from the database alone, and
        ``--app`` adds the app's declarations (and its database, unless
        --database-url is given)."""
        sub = (under or self._under).add_parser(name, help=help, description=help)
        common(sub, top=False)
        sub.set_defaults(handler=handler)
        return sub

    def group(self, name: str, help: str) -> Any:
        """``redrive NAME COMMAND``: the place for NAME's own subcommands."""
        found = self._under.add_parser(name, help=help)
        return found.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND")

    @staticmethod
    def with_app(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("app_path", nargs="?", metavar="APP",
                         help="import path of your App, such as myapp.tasks:app, or myapp.tasks:make_app() for a "
                              "function that builds it (or --app, REDRIVE_APP)")


def seconds(text: str) -> timedelta:
    """Seconds, or a number with a unit: 90, 90s, 15m, 12h, 7d."""
    try:
        return parse_duration(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "k": 2**10, "m": 2**20, "g": 2**30}


def size(text: str) -> int:
    """A number of bytes: 500MB, 2GB, 512MiB, 300M (bytes when bare)."""
    number = text.strip().rstrip("BbIiKkMmGg")
    unit = text.strip()[len(number):].lower()
    try:
        found = float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: write it as 500MB, 2GB or 512MiB") from None
    if found < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a size must be above zero")
    return int(found)


def queue_arg(text: str) -> tuple[str, int | None]:
    """``email`` or ``email=5``: a queue, and its own limit of jobs at once."""
    name, sep, limit = text.partition("=")
    if not sep:
        return name, None
    if not limit.isdigit() or int(limit) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: the limit after '=' must be a whole number of at least 1")
    return name, int(limit)


def json_arg(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    except RecursionError:
        raise argparse.ArgumentTypeError("nested too deep to read") from None


def datetime_arg(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 time") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError("give the time with a UTC offset, such as 2026-01-01T09:00+00:00")
    return value
