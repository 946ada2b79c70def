"""The reflex mesh drawn: each node in a column by its depth from what nothing triggers (timers, channels),
the edges as lines between them; an SVG the page shows as it is (no script)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

COLUMN, ROW, BOX_W, BOX_H = 210, 44, 170, 28
NO_DEPTH = ("peer",)  # a peer is read, not triggered: it gives no depth


@dataclass(frozen=True)
class Box:
    id: str
    kind: str
    name: str
    x: int
    y: int
    enabled: bool


@dataclass(frozen=True)
class Line:
    x1: int
    y1: int
    x2: int
    y2: int
    kind: str
    label: str


def layout(nodes: Sequence[Mapping[str, Any]], edges: Sequence[Mapping[str, Any]]) -> tuple[list[Box], list[Line], int, int]:
    """(boxes, lines, width, height) of the mesh document's nodes and edges."""
    depth = {str(n["id"]): 0 for n in nodes}
    for _ in range(len(nodes)):  # longest path from a root, bounded (a loop of reflexes stops growing)
        changed = False
        for e in edges:
            s, t = str(e["source"]), str(e["target"])
            if e.get("kind") not in NO_DEPTH and s in depth and t in depth and depth[t] < depth[s] + 1 <= len(nodes):
                depth[t] = depth[s] + 1
                changed = True
        if not changed:
            break
    rows: dict[int, int] = {}
    boxes: dict[str, Box] = {}
    for n in nodes:
        column = depth[str(n["id"])]
        row = rows.get(column, 0)
        rows[column] = row + 1
        boxes[str(n["id"])] = Box(str(n["id"]), str(n["kind"]), str(n["name"]), 10 + column * COLUMN,
                                  10 + row * ROW, bool(n.get("enabled", True)))
    lines = []
    for e in edges:
        a, b = boxes.get(str(e["source"])), boxes.get(str(e["target"]))
        if a is None or b is None:
            continue
        lines.append(Line(a.x + BOX_W, a.y + BOX_H // 2, b.x, b.y + BOX_H // 2, str(e.get("kind")),
                          str(e.get("label") or "")))
    width = 20 + (max(depth.values(), default=0) + 1) * COLUMN
    height = 20 + max(rows.values(), default=1) * ROW
    return list(boxes.values()), lines, width, height
