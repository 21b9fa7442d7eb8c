"""The charts page's drawing: rollup series (core/rollups.py) as the bars and
lines of its server-rendered SVG. The marks are written here, not in the
template: thousands of them through Jinja cost more than reading the
rollups (bench/NOTES.md); the template places the drawings and the
words around them."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from redrive.core.rollups import ENDINGS, Series, Window, quantile

WIDTH = 480
BARS_H = 80
LINES_H = 36
_MIN_BAR_H = 2.0  # one ending stays visible beside a peak of thousands
_TIME = {"1h": "%H:%M", "24h": "%H:%M", "7d": "%a %H:%M"}


def drawn(found: list[Series], window: Window) -> list[dict[str, Any]]:
    """Each series as the template draws it: stacked bars of endings per
    slot, the p50 and p95 durations as lines, and the window's totals."""
    return [_one(one, window) for one in found]


def _one(one: Series, window: Window) -> dict[str, Any]:
    step = WIDTH / window.slots
    width = round(max(step - 2, 2), 1)
    peak = max(sum(slot.counts.values()) for slot in one.slots) or 1
    bars, p50s, p95s = [], [], []
    for place, slot in enumerate(one.slots):
        x = round(place * step, 1)
        p50, p95 = quantile(slot.durations, 0.5), quantile(slot.durations, 0.95)
        p50s.append((x + width / 2, p50))
        p95s.append((x + width / 2, p95))
        if not any(slot.counts.values()):
            continue
        parts, top = [], float(BARS_H)
        for kind in ENDINGS:  # succeeded at the bottom, then retried, failed, cancelled
            n = slot.counts[kind]
            if n:
                h = max(n * BARS_H / peak, _MIN_BAR_H)
                top -= h
                parts.append(f'<rect class="{kind}" x="{x}" y="{round(top, 1)}" width="{width}" height="{round(h, 1)}"/>')
        said = ", ".join(f"{slot.counts[kind]} {kind}" for kind in ENDINGS if slot.counts[kind])
        timing = f"; duration p50 {ms_text(p50)}, p95 {ms_text(p95)}" if p95 is not None else ""
        label = escape(f"{slot.start.strftime(_TIME[window.name])} UTC: {said}{timing}")
        bars.append(f"<g><title>{label}</title>{''.join(parts)}</g>")
    longest = max((v for _, v in p95s if v is not None), default=None)
    durations, waits = one.merged("durations"), one.merged("waits")
    return {"key": one.key, "bars": Markup("".join(bars)), "width": width, "peak": peak, "totals": one.totals(),
            "lines": Markup(_line("p50", p50s, longest) + _line("p95", p95s, longest)), "longest": ms_text(longest),
            "duration": {"p50": ms_text(quantile(durations, 0.5)), "p95": ms_text(quantile(durations, 0.95))},
            "wait": {"p50": ms_text(quantile(waits, 0.5)), "p95": ms_text(quantile(waits, 0.95))},
            "first": one.slots[0].start.strftime(_TIME[window.name]),
            "last": one.slots[-1].start.strftime(_TIME[window.name])}


def _line(name: str, points: list[tuple[float, float | None]], longest: float | None) -> str:
    """A line as SVG: polylines, one per run of slots that have a value (a
    slot where nothing was timed breaks the line), and a dot at each value,
    so a lone slot shows too."""
    if not longest:
        return ""
    runs: list[list[str]] = [[]]
    dots = []
    for x, value in points:
        if value is None:
            runs.append([])
            continue
        y = round(LINES_H - 3 - value * (LINES_H - 6) / longest, 1)
        runs[-1].append(f"{round(x, 1)},{y}")
        dots.append(f'<circle class="{name}" cx="{round(x, 1)}" cy="{y}" r="1.8"/>')
    lines = [f'<polyline class="{name}" points="{" ".join(run)}"/>' for run in runs if len(run) > 1]
    return "".join(lines + dots)


def ms_text(ms: float | None) -> str:
    """A duration for people: 3.2 ms, 450 ms, 2.5 s, 3.1 min; – for none."""
    if ms is None:
        return "–"
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min"
