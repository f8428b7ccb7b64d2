"""Following a detected object between detector passes: normalised template matching.

A detector pass costs 10–25 ms a frame on a CPU; during an OOI test the object only moves a few
pixels a step. `BoxTracker` keeps the patch the detector last boxed (`anchor`) and finds it again
in each new frame (`follow`): OpenCV's normalised cross-correlation (`TM_CCOEFF_NORMED`) of the
patch against a window around the last box, at three scales (the player walks towards or away
from the object), well under a millisecond a frame at 320×240.

It answers None when the best match scores under `min_score` (the object turned to a side that
looks different, left the frame, or is hidden): the caller keeps the last box it trusts until
the next detector pass. The patch is only ever the detector's: matches do not replace it, so
errors do not add up between two passes.

Boxes are `[x0, y0, x1, y1]` in pixels, as the detector gives them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np

from playtester.perception.od_mask import grayscale, pixel_box


@dataclass(frozen=True)
class TrackerConfig:
    min_score: float = 0.4
    """Lowest normalised correlation (−1…1) taken as the object found again."""
    reach_x: float = 3.0
    """How far the object may move sideways between two frames, in widths of its box (turning
    moves it by about one width a step on the park, up to three)."""
    reach_y: float = 0.75
    """How far it may move up or down, in heights of its box."""
    scales: tuple[float, ...] = (0.92, 1.0, 1.08)
    """Sizes tried for the patch, relative to the last box."""
    min_side: int = 6
    """A box smaller than this (pixels) on a side is not followed."""


class BoxTracker:
    """`anchor(frame, box)` after a detector pass, `follow(frame)` on each frame in between."""

    def __init__(self, config: TrackerConfig | None = None) -> None:
        self.cfg = config or TrackerConfig()
        self.patch: np.ndarray | None = None
        self.box: np.ndarray | None = None
        """The last box found (float x0, y0, x1, y1)."""
        self.score: float = 0.0
        """The last match's correlation (1.0 right after an anchor)."""

    def anchor(self, frame: np.ndarray, box: Sequence[float] | None) -> None:
        """Take the object's look from `frame` inside `box` (None, or a box too small: nothing to follow)."""
        self.patch, self.box, self.score = None, None, 0.0
        if box is None:
            return
        h, w = frame.shape[:2]
        x0, y0, x1, y1 = pixel_box(box, w, h)
        if min(x1 - x0, y1 - y0) < self.cfg.min_side:
            return
        self.patch = grayscale(frame[y0:y1, x0:x1])
        self.box = np.array([x0, y0, x1, y1], dtype=np.float64)
        self.score = 1.0

    def follow(self, frame: np.ndarray) -> list[float] | None:
        """The object's box in `frame`, or None when it is not found well enough (the tracker
        keeps its last box and patch, so a later frame may find it again)."""
        if self.patch is None or self.box is None:
            return None
        h, w = frame.shape[:2]
        x0, y0, x1, y1 = self.box
        bw, bh = x1 - x0, y1 - y0
        reach_x, reach_y = self.cfg.reach_x * bw + 2, self.cfg.reach_y * bh + 2
        wx0, wy0, wx1, wy1 = pixel_box([x0 - reach_x, y0 - reach_y, x1 + reach_x, y1 + reach_y], w, h)
        window = grayscale(frame[wy0:wy1, wx0:wx1])
        best: tuple[float, float, float, float, float] | None = None  # score, x, y, width, height
        ph, pw = self.patch.shape
        for s in self.cfg.scales:
            tw, th = round(s * bw), round(s * bh)
            if tw < self.cfg.min_side or th < self.cfg.min_side or tw > window.shape[1] or th > window.shape[0]:
                continue
            patch = self.patch if (tw, th) == (pw, ph) else cv2.resize(self.patch, (tw, th), interpolation=cv2.INTER_AREA)
            scores = cv2.matchTemplate(window, patch, cv2.TM_CCOEFF_NORMED)
            _, top, _, (mx, my) = cv2.minMaxLoc(scores)
            if np.isfinite(top) and (best is None or top > best[0]):
                best = (float(top), wx0 + mx, wy0 + my, tw, th)
        if best is None or best[0] < self.cfg.min_score:
            self.score = 0.0 if best is None else best[0]
            return None
        self.score, bx, by, tw, th = best
        self.box = np.array([bx, by, bx + tw, by + th], dtype=np.float64)
        return [float(v) for v in self.box]
