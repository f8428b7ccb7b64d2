"""The inspect expert on a Doom level: the park's `Inspector` (walk up to an object, circle it 360°
keeping it in view) over a level's own things, through `LevelLayout`, the few questions the
Inspector asks of a map answered by the level's `NavGrid` (16-unit cells).

Like the level-walk expert it plays from telemetry and the level's geometry to make training data.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from playtester.capture.experts import bearing
from playtester.capture.level_graph import LevelGraph
from playtester.capture.level_walk import NAV_UNITS, NavGrid
from playtester.capture.park.layout import OOI
from playtester.errors import UserError

INSPECTABLE_FROM = 2, 8
"""An object is inspected from this far in nav cells (32–128 units): a start on free ground there."""


class LevelLayout:
    """`cell_of`, `centre`, `neighbours`, `route`, `straight_walk` of a level, as the Inspector asks them."""

    def __init__(self, graph: LevelGraph) -> None:
        self.nav = NavGrid(graph)

    def cell_of(self, x: float, y: float) -> tuple[int, int]:
        return self.nav.pixel(x, y)

    def centre(self, col: int, row: int) -> tuple[float, float]:
        return self.nav.origin[0] + (col + 0.5) * NAV_UNITS, self.nav.origin[1] - (row + 0.5) * NAV_UNITS

    def free(self, col: int, row: int) -> bool:
        h, w = self.nav.free.shape
        return 0 <= row < h and 0 <= col < w and bool(self.nav.free[row, col])

    def neighbours(self, col: int, row: int):
        for dc, dr in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            if self.free(col + dc, row + dr):
                yield col + dc, row + dr

    def route(self, start: tuple[int, int], goal: tuple[int, int], *, only=None) -> list[tuple[int, int]] | None:
        """Cells from `start` to `goal` (breadth first over free cells), None when there is no way."""
        prev = {start: None}
        queue = deque([start])
        while queue:
            cur = queue.popleft()
            if cur == goal:
                path = []
                while cur is not None:
                    path.append(cur)
                    cur = prev[cur]
                return path[::-1]
            for nxt in self.neighbours(*cur):
                if nxt not in prev:
                    prev[nxt] = cur
                    queue.append(nxt)
        return None

    def straight_walk(self, x0: float, y0: float, x1: float, y1: float, *, margin: float = 20.0) -> bool:
        """Whether the straight line between two points stays on free cells (up to `margin` short of the end)."""
        length = math.hypot(x1 - x0, y1 - y0)
        for t in np.arange(0.0, max(0.0, length - margin), NAV_UNITS / 2):
            x, y = x0 + (x1 - x0) * t / length, y0 + (y1 - y0) * t / length
            if not self.free(*self.cell_of(x, y)):
                return False
        return True


def level_objects_to_inspect(graph: LevelGraph) -> list[OOI]:
    """The level's objects (not monsters, which move) standing in reachable sectors, as OOIs by thing id."""
    from playtester.capture.level_play import MONSTERS

    reached = graph.reachable()
    return [OOI(t.id, t.kind, None, t.x, t.y) for t in graph.level.objects()
            if t.kind not in MONSTERS and graph.sector_at(t.x, t.y) in reached]


def level_inspect_start(layout: LevelLayout, ooi: OOI, rng: np.random.Generator, *, facing_spread: float = 45.0):
    """A start a few cells from an object, on free ground with a straight walk to it, roughly facing it."""
    col, row = layout.cell_of(ooi.x, ooi.y)
    low, high = INSPECTABLE_FROM
    cells = [(c, r) for r in range(row - high, row + high + 1) for c in range(col - high, col + high + 1)
             if low <= max(abs(c - col), abs(r - row)) <= high and layout.free(c, r)
             and layout.straight_walk(*layout.centre(c, r), ooi.x, ooi.y, margin=40.0)]
    if not cells:
        raise UserError(f"object {ooi.id} ({ooi.kind}): no free ground with a clear walk to it")
    c, r = cells[int(rng.integers(len(cells)))]
    x, y = layout.centre(c, r)
    return x, y, (bearing(x, y, ooi.x, ooi.y) + float(rng.uniform(-facing_spread, facing_spread))) % 360.0
