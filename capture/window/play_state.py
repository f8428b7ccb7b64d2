"""Whether a window game is in play, from its pixels alone.

Two signs that it is not (a game-over screen, a continue dialog, a menu):
- the screen matches one of the reference screenshots the user gave (`--out-of-play IMAGE…`):
  both are shrunk to a 64×48 grey `look` and compared by SSIM (structural similarity: light,
  contrast and structure, so a dimmed dialog over the level does not pass for the level);
- with no reference given, the picture no action changes: over the last `still_steps` steps the
  frames showed no more than `cycle` different looks, so a blinking "press start" or a two-frame
  animation still counts as still, while play, where the keys move things, does not.

`ResetRecipe`s (`reset.py`) use `similarity` too, for their "until the screen matches" steps.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from playtester.errors import UserError

LOOK_SIZE = (64, 48)
"""`(width, height)` of the grey look frames are compared at."""
MATCH = 0.6
"""SSIM of two looks at or above which they are the same screen (docs/your-own-game.md measures it
on the game of the tests)."""
STILL_STEPS = 20
"""Steps of a picture no action changes after which the game is out of play."""
STILL_TOLERANCE = 8.0
"""The largest grey-level difference (0–255) between two looks of one picture: a ball or a paddle
moving a few screen pixels changes a look pixel by more (measured on the game of the tests)."""


def look(frame: np.ndarray) -> np.ndarray:
    """A frame (RGB or grey, any size) as a small grey float32 image, the unit every comparison uses."""
    grey = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY) if frame.ndim == 3 else frame
    return cv2.resize(grey, LOOK_SIZE, interpolation=cv2.INTER_AREA).astype(np.float32)


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """SSIM of two looks (Wang et al. 2004: 7×7 Gaussian windows, σ 1.5, grey levels 0–255), in [-1, 1]."""
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2

    def blur(x: np.ndarray) -> np.ndarray:
        return cv2.GaussianBlur(x, (7, 7), 1.5)

    mu_a, mu_b = blur(a), blur(b)
    var_a, var_b = blur(a * a) - mu_a**2, blur(b * b) - mu_b**2
    cov = blur(a * b) - mu_a * mu_b
    ssim = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
    return float(ssim.mean())


def read_screenshot(path: str | Path, given_as: str) -> np.ndarray:
    """A screenshot file as RGB; a `UserError` naming it when it cannot be read."""
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise UserError(f"{given_as} {path}: missing or not an image (PNG or JPEG); give a screenshot of the game")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


class OutOfPlay:
    """Watches a game's frames and says when it has left play; see the module doc."""

    def __init__(self, references: Sequence[str | Path] = (), *, still_steps: int = STILL_STEPS, cycle: int = 2,
                 match: float = MATCH) -> None:
        if still_steps < 2:
            raise UserError(f"out of play after {still_steps} still steps: use at least 2")
        self.references = [(Path(p).name, look(read_screenshot(p, "--out-of-play"))) for p in references]
        self.still_steps, self.cycle, self.match = still_steps, cycle, match
        self.reset()

    def reset(self) -> None:
        """A new episode: forget the frames seen."""
        self._recent: deque[np.ndarray] = deque(maxlen=self.still_steps)
        self.moved = False
        """Whether the picture has changed as play changes it in this episode (still detection)."""

    def matching(self, frame: np.ndarray) -> tuple[str, float] | None:
        """The reference screenshot `frame` matches, with its SSIM; None when it matches none."""
        seen = look(frame)
        best = max(((name, similarity(seen, ref)) for name, ref in self.references), key=lambda r: r[1], default=None)
        return best if best is not None and best[1] >= self.match else None

    def observe(self, frame: np.ndarray) -> str | None:
        """Why the game is out of play on this frame (a step's), or None while it plays."""
        if self.references:
            found = self.matching(frame)
            return None if found is None else f"the screen matches {found[0]} (SSIM {found[1]:.2f})"
        self._recent.append(look(frame))
        looks = distinct_looks(self._recent, self.cycle + 1)
        if looks > self.cycle:
            self.moved = True
            return None
        if len(self._recent) < self.still_steps:
            return None
        return (f"the picture showed {'one look' if looks == 1 else f'no more than {looks} looks'} "
                f"for {self.still_steps} steps whatever the keys")


def same_picture(a: np.ndarray, b: np.ndarray, tolerance: float = STILL_TOLERANCE) -> bool:
    """Whether two looks are one picture: no pixel of them differs by more than `tolerance` grey levels."""
    return float(np.abs(a - b).max()) <= tolerance


def distinct_looks(looks: Sequence[np.ndarray], enough: int) -> int:
    """How many different pictures `looks` hold (`same_picture`), counting no further than `enough`."""
    kept: list[np.ndarray] = []
    for seen in looks:
        if not any(same_picture(seen, k) for k in kept):
            kept.append(seen)
            if len(kept) >= enough:
                break
    return len(kept)
