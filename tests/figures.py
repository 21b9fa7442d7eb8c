"""The figures fault scenarios measured, printed together at the end of a run
(``pytest_terminal_summary`` in tests/conftest.py), so CI's log shows them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    scenario: str
    name: str
    value: object
    bound: str  # what the test holds it to, or "-" when only reported


MEASURED: list[Figure] = []


def record(scenario: str, name: str, value: object, bound: str = "-") -> None:
    MEASURED.append(Figure(scenario, name, value, bound))


def table() -> list[str]:
    if not MEASURED:
        return []
    widths = [max(len(str(getattr(f, field))) for f in MEASURED) for field in ("scenario", "name", "value")]
    # By scenario: tests run side by side (pytest-xdist) record in any order.
    return [f"{f.scenario:{widths[0]}}  {f.name:{widths[1]}}  {f.value!s:>{widths[2]}}  {f.bound}"
            for f in sorted(MEASURED, key=lambda f: f.scenario)]
