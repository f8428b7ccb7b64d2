"""Coverage: where the agent has been.

- With telemetry: an occupancy grid over the map's bounds, and the share of the preferred area
  (the pathways, or any mask the user gives) that was visited.
- Without it: Go-Explore-style cells (`perception/places.py` `frame_cell`: each frame
  downsampled to a tiny grayscale picture with a few intensity levels, written by the run in
  `trajectory.jsonl`); the number of distinct cells is the coverage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class OccupancyGrid:
    """Visits per cell over world bounds `(x0, y0, x1, y1)`; row 0 is the south edge."""

    bounds: tuple[float, float, float, float]
    cell: float
    counts: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        x0, y0, x1, y1 = self.bounds
        self.cols = max(1, int(np.ceil((x1 - x0) / self.cell)))
        self.rows = max(1, int(np.ceil((y1 - y0) / self.cell)))
        self.counts = np.zeros((self.rows, self.cols), dtype=np.int64)

    def index(self, x: float, y: float) -> tuple[int, int] | None:
        """`(row, col)` of a position, or None outside the bounds."""
        x0, y0, x1, y1 = self.bounds
        if not (x0 <= x < x1 and y0 <= y < y1):
            return None
        return int((y - y0) // self.cell), int((x - x0) // self.cell)

    def visit(self, x: float, y: float) -> None:
        idx = self.index(x, y)
        if idx is not None:
            self.counts[idx] += 1

    @property
    def visited(self) -> np.ndarray:
        return self.counts > 0

    def share(self, mask: np.ndarray | None = None) -> float:
        """Share of the cells of `mask` (all cells when None) visited at least once."""
        if mask is None:
            return float(self.visited.mean())
        if mask.shape != self.counts.shape:
            raise ValueError(f"mask of shape {mask.shape} for a grid of {self.counts.shape}")
        total = int(mask.sum())
        return float((self.visited & mask).sum() / total) if total else 0.0
