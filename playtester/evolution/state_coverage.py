"""State coverage, Wuji's measure of exploration: telemetry features cut into equal intervals.

A state is the tuple of bucket indices of the chosen telemetry features (`floor(value / width)`
per component: `position` (x, y, z) with a width of 64 map units is one bucket per 64×64×64
block); the number of distinct states seen is the coverage. A game that reports none of the
features (a Gymnasium env seen through pixels, a window without telemetry) falls back to the
Go-Explore cells of its frames (downsampled grayscale with a few levels, as the app's
coverage counts them; this layer cannot import the app, so the few lines are its own).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Hashable

import cv2
import numpy as np

DOOM_FEATURES = {"position": 64.0, "angle": 90.0}
"""On ViZDoom: 64-unit blocks of the map (half a park cell) and four headings."""


@dataclass
class StateCoverageConfig:
    """Which telemetry makes a state, and how finely it is cut."""

    features: dict[str, float] = field(default_factory=lambda: {"position": 1.0})
    """Telemetry key → interval width. Nested keys are dotted (`env_info.x`); a vector value
    (`position`) is cut per component with the same width."""
    frame_size: tuple[int, int] = (11, 8)
    """(w, h) of the frame cells used when the game reports none of the features."""
    frame_levels: int = 8
    """Intensity levels of the frame cells."""

    def __post_init__(self) -> None:
        bad = {k: w for k, w in self.features.items() if not (isinstance(w, (int, float)) and w > 0 and math.isfinite(w))}
        if bad:
            raise ValueError(f"state feature widths must be positive numbers, got {bad}")
        self.frame_size = (int(self.frame_size[0]), int(self.frame_size[1]))
        if min(self.frame_size) < 1 or self.frame_levels < 2:
            raise ValueError(f"frame cells of {self.frame_size} with {self.frame_levels} levels: need ≥ 1 pixel and ≥ 2 levels")


def default_state_features(game: str) -> dict[str, float]:
    """Features that suit a game spec: map blocks and headings on ViZDoom, cells elsewhere."""
    return dict(DOOM_FEATURES) if game.startswith("doom:") else {"position": 1.0}


def _lookup(info: dict[str, Any], key: str) -> Any:
    value: Any = info
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def frame_state(frame: np.ndarray, size: tuple[int, int], levels: int) -> bytes:
    """A frame as a Go-Explore cell: grayscale, area-downsampled to `size` (w, h), `levels` intensities."""
    small = cv2.resize(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY), size, interpolation=cv2.INTER_AREA)
    return (small.astype(np.uint16) * levels // 256).astype(np.uint8).tobytes()


def state_key(frame: np.ndarray, info: dict[str, Any], cfg: StateCoverageConfig) -> Hashable:
    """The state of one step: feature buckets, or `("frame", cell)` without telemetry."""
    buckets: list[int] = []
    found = False
    for key, width in cfg.features.items():
        value = _lookup(info, key)
        if value is None:
            continue
        found = True
        for v in np.atleast_1d(np.asarray(value, dtype=np.float64)).ravel():
            buckets.append(int(math.floor(v / width)) if math.isfinite(v) else 0)
    if found:
        return tuple(buckets)
    return ("frame", frame_state(frame, cfg.frame_size, cfg.frame_levels))
