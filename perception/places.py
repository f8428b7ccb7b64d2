"""Places: the distinct views a player reached, from pixels alone, for games with no map.

Every frame is embedded as a unit vector and `Places`, an online clusterer, assigns it to a
place: the nearest place's exemplar within `threshold` (cosine distance) is visited again;
farther than that from every exemplar, the frame starts a new place and is its exemplar.
Exemplars never move (a leader clusterer), so a place's thumbnail is the very view that started
it, a run resumed from its logs rebuilds the same places, and several instances' places merge by
feeding their exemplars through one `Places`.

Runs embed frames with `PixelEmbedding` (a 16×12 grey picture, its mean taken off). The frozen
inverse-dynamics encoder a run has (`EncoderEmbedding`) was measured against it on park demos
whose telemetry says where each frame was taken (`scripts/bench_places.py`,
docs/benchmarks/own-game.md): the encoder tells two frames of one view from two of different
views a little better over all pairs (ROC AUC 0.82–0.83 against 0.77–0.78), but clustered online
its places are less often one view at the same number of places (69–73 % of steps within 128
units and 60° of their place's exemplar, against 75–78 % for pixels, at about 40 places an
episode) and it costs 50–80 times the time a frame; so runs use pixels, and the encoder stays
here for that measurement. `PIXEL_THRESHOLD` is the largest of the sweep whose places are still
one view for 80 % of the steps. The report's places view (`playtester/report/places.py`) draws
them; a confinement oracle can read `Places.count` over time (distinct places stop growing while
the views go on).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import cv2
import numpy as np

PIXEL_SIZE = (16, 12)
"""`(width, height)` of the grey picture `PixelEmbedding` compares."""
PIXEL_THRESHOLD = 0.075
"""Cosine distance beyond which two pixel embeddings are different places: on park demos 82–87 %
of steps lie within 128 map units and 60° of their place's exemplar (scripts/bench_places.py)."""
ENCODER_THRESHOLD = 0.0005
"""The encoder's features are sparse ReLU outputs whose angles are small: the smallest threshold
measured, whose places are one view for 69–73 % of the steps (below pixels at any threshold)."""


class Embedding(Protocol):
    name: str
    """`encoder` or `pixels`: what the run's places are clustered by (the report says which)."""
    threshold: float

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        """A unit vector for an RGB uint8 frame (zeros for a blank one)."""


def unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return (v / n).astype(np.float32) if n > 1e-6 else np.zeros_like(v, dtype=np.float32)


class PixelEmbedding:
    """The frame in grey at 16×12 (area-averaged), its mean taken off: two frames are close when
    their light and dark lie in the same places, whatever the overall brightness."""

    name = "pixels"

    def __init__(self, threshold: float = PIXEL_THRESHOLD) -> None:
        self.threshold = threshold

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        grey = cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)
        small = cv2.resize(grey, PIXEL_SIZE, interpolation=cv2.INTER_AREA).astype(np.float32).ravel()
        return unit(small - small.mean())


class EncoderEmbedding:
    """The frozen inverse-dynamics encoder's features of the whole frame (no object masked),
    compared by angle: what the run's policies see of a view."""

    name = "encoder"

    def __init__(self, encoder: Any, frames: Any, threshold: float = ENCODER_THRESHOLD) -> None:
        """`encoder`: a `FeatureEncoder` (a policy's, frozen); `frames`: its `FrameSpec`."""
        self.encoder = encoder.eval()
        self.frames = frames
        self.threshold = threshold

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        import torch

        small = self.frames.resize(np.ascontiguousarray(frame))
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(small)).permute(2, 0, 1)[None].float().div_(255.0)
            device = next(self.encoder.parameters()).device
            feat = self.encoder(x.to(device))[0].float().cpu().numpy()
        return unit(feat)


@dataclass
class Place:
    """One distinct view: its exemplar (the frame that started it), when it was first seen and
    how often it was visited."""

    id: int
    vector: np.ndarray
    first_step: int
    """The clusterer's step count when the place was first seen (0 for the first frame)."""
    visits: int = 1


@dataclass
class Places:
    """The online clusterer (see the module doc). `visit(vector)` → `(place id, new?)`."""

    threshold: float
    places: list[Place] = field(default_factory=list)
    steps: int = 0
    _rows: np.ndarray | None = field(default=None, repr=False)
    """The exemplars as the first `count` rows of a buffer whose length doubles when full: adding
    a place does not copy every exemplar (a level's run finds thousands of places)."""
    _filled: int = field(default=0, repr=False)
    """The buffer's rows that hold their place's exemplar."""

    @property
    def count(self) -> int:
        return len(self.places)

    def nearest(self, vector: np.ndarray) -> tuple[int | None, float]:
        """The nearest place's index and its cosine distance (None, inf with no place yet)."""
        if not self.places:
            return None, float("inf")
        similarity = self._exemplars() @ vector
        i = int(np.argmax(similarity))
        return i, float(1.0 - similarity[i])

    def visit(self, vector: np.ndarray) -> tuple[int, bool]:
        i, distance = self.nearest(vector)
        self.steps += 1
        if i is not None and distance <= self.threshold:
            self.places[i].visits += 1
            return self.places[i].id, False
        return self.add(vector, self.steps - 1).id, True

    def _exemplars(self) -> np.ndarray:
        n = len(self.places)
        if self._rows is None or len(self._rows) < n:
            rows = np.zeros((max(64, 2 * n), len(self.places[0].vector)), np.float32)
            if self._rows is not None:
                rows[:self._filled] = self._rows[:self._filled]
            self._rows = rows
        for i in range(self._filled, n):
            self._rows[i] = self.places[i].vector
        self._filled = n
        return self._rows[:n]

    def add(self, vector: np.ndarray, first_step: int) -> Place:
        """A new place with `vector` as its exemplar (also how a resumed run puts back its places)."""
        place = Place(len(self.places), np.asarray(vector, np.float32), first_step)
        self.places.append(place)
        return place


def frame_cell(frame: np.ndarray, size: tuple[int, int] = (11, 8), levels: int = 8) -> bytes:
    """The Go-Explore cell of a frame: grayscale, downsampled to `size` (w, h), `levels` intensities."""
    gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    small = cv2.resize(gray, size, interpolation=cv2.INTER_AREA)
    return (small.astype(np.uint16) * levels // 256).astype(np.uint8).tobytes()


def thumbnail(frame: np.ndarray, width: int = 96) -> np.ndarray:
    """A place's picture for people: the frame scaled to `width` pixels wide (area-averaged)."""
    h, w = frame.shape[:2]
    return cv2.resize(np.ascontiguousarray(frame), (width, max(1, round(h * width / w))), interpolation=cv2.INTER_AREA)
