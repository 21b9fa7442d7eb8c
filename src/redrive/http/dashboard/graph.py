"""A workflow's graph as server-rendered SVG: a column per depth (a step
sits one column right of its deepest parent), a box per step name (a
fan-out of thousands is one box with its counts), an arrow per edge, each
box linking to its job (a single step) or to its row below (a fan-out).
Written here, not in the template, for the reason the charts are."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from markupsafe import Markup, escape

BOX_W, BOX_H, GAP_X, GAP_Y = 250, 54, 60, 18
_ORDER = ("succeeded", "running", "queued", "scheduled", "pending", "blocked", "failed", "cancelled")


def _columns(steps: list[dict[str, Any]]) -> dict[str, int]:
    depth: dict[str, int] = {}
    for step in steps:  # declared after their parents: one pass is enough
        depth[step["name"]] = 1 + max((depth[e["step"]] for e in step["after"]), default=-1)
    return depth


def drawn(workflow: Mapping[str, Any], jobs: Mapping[str, tuple[UUID, ...]], base: str) -> Markup:
    steps = workflow["steps"]
    depth = _columns(steps)
    rows: dict[int, int] = {}
    place: dict[str, tuple[int, int]] = {}
    for step in steps:
        column = depth[step["name"]]
        row = rows.get(column, 0)
        rows[column] = row + 1
        place[step["name"]] = (column * (BOX_W + GAP_X), row * (BOX_H + GAP_Y))
    width = (max(depth.values(), default=0) + 1) * (BOX_W + GAP_X) - GAP_X
    height = max(rows.values(), default=1) * (BOX_H + GAP_Y) - GAP_Y
    marks = []
    for step in steps:
        x, y = place[step["name"]]
        for edge in step["after"]:
            px, py = place[edge["step"]]
            dashed = "" if edge["policy"] == "succeeded" else ' stroke-dasharray="4 3"'
            marks.append(f'<line class="edge" x1="{px + BOX_W}" y1="{py + BOX_H / 2}" x2="{x}" y2="{y + BOX_H / 2}"'
                         f' marker-end="url(#arrow)"{dashed}><title>{escape(edge["step"])} → {escape(step["name"])}'
                         f' ({escape(edge["policy"])})</title></line>')
    for step in steps:
        x, y = place[step["name"]]
        counts = step["counts"]
        ids = jobs.get(step["name"], ())
        status = next((s for s in ("failed", "blocked", "running", "queued", "pending", "cancelled", "succeeded")
                       if counts.get(s)), "pending")
        said = ", ".join(f"{counts[s]} {s}" for s in _ORDER if counts.get(s))
        target = f"{base}/jobs/{ids[0]}" if len(ids) == 1 else f"#step-{step['name']}"
        marks.append(
            f'<a href="{escape(target)}" data-step="{escape(step["name"])}"><g class="step {status}">'
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6"/>'
            f'<text x="{x + 10}" y="{y + 21}" class="name">{escape(step["name"])}'
            f'{"" if len(ids) == 1 else f" ×{len(ids):,}"}</text>'
            f'<text x="{x + 10}" y="{y + 40}" class="counts">{escape(said or "no jobs")}</text></g></a>')
    return Markup(
        f'<svg class="workflow-graph" viewBox="-2 -2 {width + 4} {height + 4}" width="{width + 4}" '
        f'height="{height + 4}" role="img" aria-label="the workflow\'s steps and edges">'
        '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="8" markerHeight="8" '
        'orient="auto"><path d="M0,0 L8,4 L0,8 z"/></marker></defs>'
        + "".join(marks) + "</svg>")
