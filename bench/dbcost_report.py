"""``bench.dbcost``'s Markdown: each phase's figures per job, the whole job
(batch enqueue and processing with one worker) against PgQueuer and the
floor, where each system's bytes go, and the issue's targets."""

from __future__ import annotations

import platform
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from bench.dbcost import Cost
    from bench.sqlitecost import Use

COLUMNS = (("WAL B", "wal_bytes", 0), ("records", "records", 2), ("FPI", "fpi", 3), ("commits", "commits", 3),
           ("ins", "inserted", 2), ("upd", "updated", 2), ("HOT", "hot", 2), ("del", "deleted", 2),
           ("locks", "locked", 2), ("index entries", "index_entries", 2), ("statements", "statements", 3))
WHOLE = ("enqueue 1000/call", "processing 1 worker")
PEER, FLOOR = "PgQueuer", "floor: pgbench claim-100-and-archive"
COUNTED = ("The server ran under callgrind (`--instructions`): PG k instr is thousands of instructions a job "
           "executed by the system's connections' backends, each from its start to its end (the server's own "
           "processes, whose work follows the WAL's bytes, are not counted); the same from run to run. The CPU "
           "figures beside it are callgrind's slowed times, not comparable with a normal run's.")
T = TypeVar("T")


def whole(costs: dict[str, Cost]) -> Cost | None:
    if not all(phase in costs for phase in WHOLE):
        return None
    return costs[WHOLE[0]] + costs[WHOLE[1]]


def _row(system: str, cost: Cost, counted: bool = False) -> str:
    cells = [f"{cost.per_job(name):,.{digits}f}" for _, name, digits in COLUMNS]
    if counted:
        cells.append(f"{cost.per_job('instructions') / 1000:,.1f}")
    return (f"| {system} | {' | '.join(cells)} | {cost.cpu_s / cost.jobs * 1e6:,.1f} | "
            f"{_watched(cost, cost.lock_wait_s)} | {_watched(cost, cost.idle_in_transaction_s)} | "
            f"{cost.seconds:,.1f} |")


def _watched(cost: Cost, seconds: float) -> str:
    return f"{seconds / cost.jobs * 1e6:,.0f}" if cost.watched else "–"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "–"


def median_run(runs: list[dict[str, dict[str, Cost]]]) -> dict[str, dict[str, Cost]]:
    """Each system's phases as the run whose CPU for that phase was the
    median (the WAL's figures agree across runs; the CPU's do not)."""
    merged: dict[str, dict[str, Cost]] = {}
    for system in dict.fromkeys(s for results in runs for s in results):
        phases = dict.fromkeys(p for results in runs for p in results.get(system, {}))
        merged[system] = {phase: _median([r[system][phase] for r in runs if phase in r.get(system, {})],
                                         key=lambda c: c.cpu_s)
                          for phase in phases}
    return merged


def _median(values: list[T], key: Callable[[T], float]) -> T:
    """The middle one (of an even number, the lower middle: a figure measured, not a mean)."""
    return sorted(values, key=key)[(len(values) - 1) // 2]


def report(runs: list[dict[str, dict[str, Cost]]], *, jobs: int, took_s: float,
           sqlite: dict[str, dict[str, Use]] | None = None, fsync_s: float = 0.0) -> str:
    """``runs``: each a run of every system, the systems taking turns."""
    results = median_run(runs)
    counted = any(cost.instructions for costs in results.values() for cost in costs.values())
    lines = [f"# What PostgreSQL does per job ({jobs:,} jobs a phase)", "",
             f"{platform.node() and 'This machine'}: {platform.platform()}, Python {platform.python_version()}. "
             f"A private PostgreSQL (autovacuum off, pg_stat_statements); a CHECKPOINT before each phase "
             f"and a VACUUM before the single enqueues (as autovacuum would after the drains); "
             f"WAL read back with pg_waldump; CPU: the server's processes; lock waits and idle-in-transaction time: "
             f"the system's backends in pg_stat_activity, sampled every 2 ms with 8 workers, summed. "
             f"{len(runs)} run{'s' if len(runs) > 1 else ''} of each system, taking turns; each phase's row is "
             f"its run of median CPU. All took {took_s / 60:.1f} min.",
             ""]
    if counted:
        lines += [COUNTED, ""]
    header = ("| system | " + " | ".join(title for title, _, _ in COLUMNS) + (" | PG k instr" if counted else "")
              + " | PG CPU µs | lock wait µs | idle in tx µs | s |")
    rule = "|---|" + "---:|" * (len(COLUMNS) + 4 + counted)
    phases = list(dict.fromkeys(p for costs in results.values() for p in costs))
    for phase in phases:
        lines += [f"## {phase} (per job)", "", header, rule]
        lines += [_row(system, costs[phase], counted) for system, costs in results.items() if phase in costs]
        lines.append("")
    # each system's run of median whole-job CPU (the sum of two phases' medians is no run's)
    totals = {system: _median(wholes, key=lambda c: c.cpu_s) for system in results
              if (wholes := [w for r in runs if (w := whole(r.get(system, {}))) is not None])}
    lines += ["## The whole job: batch enqueue and processing with one worker (per job)", "", header, rule]
    lines += [_row(system, cost, counted) for system, cost in totals.items()]
    lines.append("")
    lines += _targets(totals, runs, counted)
    lines += ["## Where each system's WAL goes (the whole job, bytes per job, largest first)", ""]
    for system, cost in totals.items():
        top = cost.by_relation.most_common(10)
        lines.append(f"- **{system}**: " + ", ".join(f"{name} {size / cost.jobs:,.0f}" for name, size in top))
    lines.append("")
    lines += _statements(results)
    if sqlite:
        lines += sqlite_section(sqlite, fsync_s)
    return "\n".join(lines)


def _statements(results: dict[str, dict[str, Cost]]) -> list[str]:
    """Where the server's CPU goes in processing with one worker: each
    statement's execution (pg_stat_statements: time inside the executor, a
    lock wait included), largest first, and the rest (parsing, planning,
    the protocol, the commit's flush, the server's own processes)."""
    lines = ["## Where PostgreSQL's CPU goes (processing 1 worker, µs a job, largest first)", ""]
    for system, costs in results.items():
        if (cost := costs.get(WHOLE[1])) is None:
            continue
        top = [(name, spent) for name, spent in cost.by_statement.most_common() if spent / cost.jobs >= 0.5e-6]
        rest = cost.cpu_s - sum(cost.by_statement.values())
        lines.append(f"- **{system}** ({cost.cpu_s / cost.jobs * 1e6:,.1f}): "
                     + ", ".join(f"`{name}` {spent / cost.jobs * 1e6:,.1f}" for name, spent in top[:8])
                     + f"; outside statements' execution {rest / cost.jobs * 1e6:,.1f}")
    return [*lines, ""]


SQLITE_PEER, SQLITE_FLOOR = "Huey (SQLite)", "bare SQLite loop"


def sqlite_section(uses: dict[str, dict[str, Use]], fsync_s: float) -> list[str]:
    """bench/sqlitecost.py's figures: per job, each phase and the whole job,
    with the ratios against Huey and the bare loop."""
    lines = ["## SQLite: what a job costs the file and the processes that write it (per job)", "",
             f"Bytes handed to write() (the WAL's frames and checkpoints' pages) and write calls, from "
             f"/proc/PID/io; CPU of the enqueuing process or of the worker's processes. One fsync of 4 KiB on "
             f"this disk during the run: {fsync_s * 1e6:,.0f} µs (median of 200): the floor under every "
             f"durable commit.", "",
             "| phase | system | bytes written | write calls | CPU µs | s | jobs/s |", "|---|---|---:|---:|---:|---:|---:|"]
    phases = list(dict.fromkeys(p for by_phase in uses.values() for p in by_phase))
    for phase in phases:
        for system, by_phase in uses.items():
            if (use := by_phase.get(phase)) is not None:
                lines.append(f"| {phase} | {system} | {use.per_job('written'):,.0f} | {use.per_job('writes'):,.2f} | "
                             f"{use.cpu_s / use.jobs * 1e6:,.1f} | {use.seconds:,.2f} | {use.jobs / use.seconds:,.0f} |")
    lines += ["", "| the whole job | bytes written | CPU µs | ÷ Huey bytes | ÷ Huey CPU | ÷ bare loop bytes | "
              "÷ bare loop CPU |", "|---|---:|---:|---:|---:|---:|---:|"]
    totals = {system: (sum(by_phase[p].written for p in WHOLE) / by_phase[WHOLE[0]].jobs,
                       sum(by_phase[p].cpu_s for p in WHOLE) / by_phase[WHOLE[0]].jobs)
              for system, by_phase in uses.items() if all(p in by_phase for p in WHOLE)}
    peer, floor = totals.get(SQLITE_PEER), totals.get(SQLITE_FLOOR)
    for system, (written, cpu) in totals.items():
        lines.append(f"| {system} | {written:,.0f} | {cpu * 1e6:,.1f} | "
                     f"{_ratio(written, peer[0]) if peer else '–'} | {_ratio(cpu, peer[1]) if peer else '–'} | "
                     f"{_ratio(written, floor[0]) if floor else '–'} | {_ratio(cpu, floor[1]) if floor else '–'} |")
    lines.append("")
    return lines


def _cpu_ratios(runs: list[dict[str, dict[str, Cost]]], system: str, against: str) -> list[float]:
    """The whole job's CPU over ``against``'s, in each run that had both: pairs
    measured minutes apart, so the machine's hour mostly cancels."""
    pairs = [(whole(r[system]), whole(r[against])) for r in runs if system in r and against in r]
    return [mine.cpu_s / theirs.cpu_s for mine, theirs in pairs if mine and theirs and theirs.cpu_s]


def _targets(totals: dict[str, Cost], runs: list[dict[str, dict[str, Cost]]], counted: bool = False) -> list[str]:
    peer, floor = totals.get(PEER), totals.get(FLOOR)
    lines = ["## Against PgQueuer and the floor (the whole job; ratios within each run: the CPU's is the median "
             "of the runs' ratios, the runs' own in brackets)", "",
             "| system | WAL ÷ PgQueuer | WAL ÷ floor | PG CPU ÷ PgQueuer | PG CPU ÷ floor |"
             + (" instructions ÷ PgQueuer | instructions ÷ floor |" if counted else ""),
             "|---|---:|---:|---:|---:|" + "---:|---:|" * counted]
    for system, cost in totals.items():
        if system in (PEER, FLOOR):
            continue
        counts = (f" {_ratio(cost.instructions, peer.instructions) if peer else '–'} | "
                  f"{_ratio(cost.instructions, floor.instructions) if floor else '–'} |") if counted else ""
        lines.append(f"| {system} | {_ratio(cost.wal_bytes, peer.wal_bytes) if peer else '–'} | "
                     f"{_ratio(cost.wal_bytes, floor.wal_bytes) if floor else '–'} | "
                     f"{_cpu_cell(_cpu_ratios(runs, system, PEER))} | {_cpu_cell(_cpu_ratios(runs, system, FLOOR))} |"
                     + counts)
    lines += ["", "Targets: WAL ≤ 0.6× PgQueuer's and ≤ 2.0× the floor's; PostgreSQL's CPU ≤ 0.7× PgQueuer's.", ""]
    return lines


def _cpu_cell(ratios: list[float]) -> str:
    if not ratios:
        return "–"
    each = f" ({', '.join(f'{r:.2f}' for r in ratios)})" if len(ratios) > 1 else ""
    return f"{_median(ratios, key=float):.2f}{each}"
