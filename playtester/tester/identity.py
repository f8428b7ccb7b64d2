"""Telling objects of interest apart without telemetry: tracking while in view, appearance after.

With telemetry a detection is matched to the nearest known OOI (`tester.match_ooi`). Without it,
the tester loop still has to test each OOI once:

- while an OOI stays in view it is tracked from one detection to the next by box overlap
  (`best_overlap`), which is how a test follows its object;
- once tested, it is remembered by `appearance_signature`s taken from the views its test saw:
  the box's own pixels and the scene beside it (twice the box's width either side, half its
  height above and below), so that two identical barrels in different places differ and the
  same barrel seen again from nearby does not. A detection whose signature is close to any
  remembered view (`same_object`) is taken as that object.

Measured on the small park at `SAME_OBJECT` = 0.68, views of one OOI at most 30 steps apart
match in 74–76 % of pairs; pairs of different OOIs of the same kind are confused in 1.1 % of
pairs on one sample of random walks (338 boxes) and 17 % on another (450 boxes), where nearly
all of it is one pair of same-kind OOIs in alike surroundings (a wider view of the scene
lowered that only to 12 %). So without telemetry an OOI that looks and stands like a tested
one may be missed; one is rarely tested twice. `tests/test_identity.py` keeps both checks.

Signatures are short float vectors, written to the run's `claims.jsonl` so that every game
instance knows what the others tested.
"""

from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

from playtester.perception.od_mask import pixel_box

Box = Sequence[float]

OBJECT_SIDE = 6
"""The box's own pixels, resized to OBJECT_SIDE² RGB."""
CONTEXT_SIDE = 8
"""The scene beside the box, resized to CONTEXT_SIDE² gray."""
SAME_OBJECT = 0.68
"""Cosine similarity of two signatures from which they are taken for one object."""


def _standard(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.float32).ravel()
    v -= v.mean()
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 1e-6 else v


def appearance_signature(frame: np.ndarray, box: Box) -> np.ndarray | None:
    """Unit-length signature of the object in `box` and its surroundings; None for an empty box."""
    h, w = frame.shape[:2]
    x0, y0, x1, y1 = pixel_box(box, w, h)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return None
    bw, bh = x1 - x0, y1 - y0
    cx0, cy0, cx1, cy1 = pixel_box([x0 - 2 * bw, y0 - bh / 2, x1 + 2 * bw, y1 + bh / 2], w, h)
    obj = cv2.resize(frame[y0:y1, x0:x1], (OBJECT_SIDE, OBJECT_SIDE), interpolation=cv2.INTER_AREA)
    scene = cv2.cvtColor(frame[cy0:cy1, cx0:cx1], cv2.COLOR_RGB2GRAY)
    scene = cv2.resize(scene, (CONTEXT_SIDE, CONTEXT_SIDE), interpolation=cv2.INTER_AREA)
    # object and scene weigh the same, whatever their lengths
    sig = np.concatenate([_standard(obj), _standard(scene)]) / np.sqrt(2.0)
    return sig.astype(np.float32)


def same_object(signature: np.ndarray, known: Sequence[np.ndarray], threshold: float = SAME_OBJECT) -> bool:
    """Whether `signature` is close enough to any of `known` to be the same object."""
    if not len(known):
        return False
    return bool(np.max(np.stack(known) @ signature) >= threshold)


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two `[x0, y0, x1, y1]` boxes."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def nearest_box(previous: Box, boxes: Sequence[Box], reach: float = 1.5, size_ratio: float = 2.0) -> int | None:
    """Index of the box whose centre lies nearest `previous`'s, within `reach` times its width,
    and whose height is within `size_ratio` of its height; None when none is. Looser than
    overlap: the detector runs only every few steps, and the view moves in between."""
    pw, ph = previous[2] - previous[0], previous[3] - previous[1]
    px, py = (previous[0] + previous[2]) / 2, (previous[1] + previous[3]) / 2
    best, best_d = None, reach * max(pw, 1.0)
    for i, b in enumerate(boxes):
        h = b[3] - b[1]
        if not (ph / size_ratio <= h <= ph * size_ratio):
            continue
        d = float(np.hypot((b[0] + b[2]) / 2 - px, (b[1] + b[3]) / 2 - py))
        if d <= best_d:
            best, best_d = i, d
    return best


def best_overlap(previous: Box, boxes: Sequence[Box], minimum: float = 0.2) -> int | None:
    """Index of the box that overlaps `previous` most (at least `minimum` IoU), or None."""
    best, best_iou = None, minimum
    for i, b in enumerate(boxes):
        v = iou(previous, b)
        if v >= best_iou:
            best, best_iou = i, v
    return best
