"""The bird's-eye map of a park: grass, water, pathways in white, OOIs, as an RGB image.

`BirdsEye` also maps world positions to pixels, so that reports can draw traces and OOI marks on
the same picture.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from playtester.files import write_bytes_atomic
from playtester.capture.park.layout import BRIDGE, GRASS, PATH, WATER, ParkLayout

COLOURS = {
    GRASS: (76, 140, 64),
    PATH: (250, 250, 250),
    WATER: (52, 104, 186),
    BRIDGE: (196, 160, 110),
}
KIND_COLOURS = {"pillar": (128, 128, 128), "barrel": (30, 110, 50), "tire": (20, 20, 20), "chair": (140, 80, 30)}


@dataclass
class BirdsEye:
    """An RGB map image and the world bounds `(x0, y0, x1, y1)` it covers."""

    image: np.ndarray
    bounds: tuple[float, float, float, float]

    def to_pixel(self, x: np.ndarray | float, y: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """Pixel column and row of world positions (row 0 is the north edge)."""
        h, w = self.image.shape[:2]
        x0, y0, x1, y1 = self.bounds
        px = (np.asarray(x, dtype=float) - x0) / (x1 - x0) * w
        py = (y1 - np.asarray(y, dtype=float)) / (y1 - y0) * h
        return px, py

    def save_png(self, path: str | Path) -> Path:
        ok, buf = cv2.imencode(".png", cv2.cvtColor(self.image, cv2.COLOR_RGB2BGR))
        assert ok
        return write_bytes_atomic(path, buf.tobytes())


def render_birdseye(layout: ParkLayout, pixels_per_cell: int = 12, *, oois: bool = True) -> BirdsEye:
    grid = layout.grid[::-1]  # north up
    rgb = np.zeros(grid.shape + (3,), dtype=np.uint8)
    for terrain, colour in COLOURS.items():
        rgb[grid == terrain] = colour
    image = np.ascontiguousarray(np.repeat(np.repeat(rgb, pixels_per_cell, 0), pixels_per_cell, 1))
    view = BirdsEye(image=image, bounds=layout.bounds)
    for x0, y0, x1, y1 in layout.walls:
        c = layout.config.cell
        (px0, px1), (py0, py1) = view.to_pixel([x0 * c, x1 * c], [y0 * c, y1 * c])
        cv2.line(image, (int(px0), int(py0)), (int(px1), int(py1)), (255, 0, 255), 1)
    if oois:
        r = max(2, pixels_per_cell // 3)
        for o in layout.oois:
            px, py = view.to_pixel(o.x, o.y)
            cv2.circle(image, (int(px), int(py)), r, KIND_COLOURS[o.kind], -1)
            cv2.circle(image, (int(px), int(py)), r, (0, 0, 0), 1)
    return view
