"""Labelling with the model's help: a detector's boxes as pre-labels, frames most uncertain first,
and what a person must still do to correct them.

`shots --demos … --prelabel DETECTOR.ckpt` runs a trained detector on the frames to label and
writes its confident boxes (`PRELABEL_SCORE`) as the labels' first draft (each marked a
prediction, with its score); the frames come most uncertain first, so that a person who labels
only the first part of the file labels the frames the detector learns most from.
`scripts/bench_prelabel.py` measures the saving on the park with the ground truth standing in for
the person's corrections (`corrections`).

The cost model, one action each (docs/benchmarks/own-game.md):

- **accept**: a pre-label of the right class over a true box at IoU ≥ `ACCEPT_IOU` is left as it
  is; it costs nothing;
- **fix**: a pre-label over a true box at IoU ≥ `MATCH_IOU` but of the wrong class or looser than
  `ACCEPT_IOU` is corrected (its class changed or its corners dragged): one action;
- **draw**: a true box no pre-label found is drawn: one action;
- **delete**: a pre-label over no true box is deleted: one action. Pre-labels on boxes too small
  to ask for (the file's crowd boxes) are left alone and cost nothing, as in scoring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

PRELABEL_SCORE = 0.7
"""Detections at least this confident are written as pre-labels. Measured on the park, one seed
(scripts/bench_prelabel.py, docs/benchmarks/own-game.md): among 0.3–0.9, 0.7 costs a person the
fewest actions or within 4 % of the fewest, in random and uncertainty order and under both cost
models; the detector's own 0.5 costs 4–34 % more (more boxes to delete)."""
CANDIDATE_SCORE = 0.05
"""Detections at least this confident count towards a frame's uncertainty (below, the detector
has as good as said "nothing here")."""
MATCH_IOU = 0.5
"""A pre-label and a true box overlapping this much are the same object (AP50's rule)."""
ACCEPT_IOU = 0.8
"""A pre-label this close to its true box, of the right class, is accepted untouched; looser, a
person drags its corners (a fix). Close enough that the accepted box trains like the true one."""


@dataclass
class Prelabels:
    """One frame's pre-labels: the detector's boxes at or above the pre-label threshold, and the
    frame's uncertainty over every candidate."""

    boxes: np.ndarray
    """n×4 `[x0, y0, x1, y1]` pixels."""
    labels: np.ndarray
    """n class labels, 1…K (the detector's `classes[label - 1]`)."""
    scores: np.ndarray
    uncertainty: float


def binary_entropy(p: np.ndarray) -> np.ndarray:
    """H(p) in bits: 1 at p = 0.5, 0 at 0 and 1."""
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-9, 1 - 1e-9)
    return -(p * np.log2(p) + (1 - p) * np.log2(1 - p))


def frame_uncertainty(scores: Sequence[float], floor: float = CANDIDATE_SCORE) -> float:
    """How unsure the detector is about a frame: the largest binary entropy of its candidate
    detections' scores (those at least `floor`). A frame where some box is near 0.5 comes first;
    one with only sure boxes, or none, last."""
    s = np.asarray(scores, dtype=np.float64)
    s = s[s >= floor]
    return float(binary_entropy(s).max()) if len(s) else 0.0


def prelabels_of(boxes: np.ndarray, labels: np.ndarray, scores: np.ndarray, threshold: float) -> Prelabels:
    """A frame's pre-labels from the detector's raw detections (every candidate, any score)."""
    keep = np.asarray(scores) >= threshold
    return Prelabels(np.asarray(boxes, np.float32).reshape(-1, 4)[keep], np.asarray(labels, np.int64)[keep],
                     np.asarray(scores, np.float32)[keep], frame_uncertainty(scores))


def most_uncertain_first(frames: Sequence[Prelabels]) -> list[int]:
    """Indices of `frames`, most uncertain first (ties keep their order)."""
    return sorted(range(len(frames)), key=lambda i: -frames[i].uncertainty)


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of `a` (n×4, xyxy) with every box of `b` (m×4): n×m."""
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 2], b[None, :, 2])
    y1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


@dataclass
class Corrections:
    """What a person does to turn a frame's pre-labels into its true labels (see the module doc)."""

    accepts: int = 0
    fixes: int = 0
    draws: int = 0
    deletes: int = 0

    @property
    def actions(self) -> int:
        """Boxes a person must draw, fix or delete: the cost the benchmark counts."""
        return self.fixes + self.draws + self.deletes

    def __add__(self, other: "Corrections") -> "Corrections":
        return Corrections(self.accepts + other.accepts, self.fixes + other.fixes, self.draws + other.draws,
                           self.deletes + other.deletes)


def corrections(pred: Prelabels | None, true_boxes: np.ndarray, true_labels: np.ndarray,
                crowd_boxes: np.ndarray | None = None, accept_iou: float = ACCEPT_IOU) -> Corrections:
    """The corrections of one frame: pre-labels matched to true boxes greedily, largest IoU first
    (each box at most once, pairs at IoU ≥ `MATCH_IOU`), a match of the right class at
    `accept_iou` or more accepted. Without pre-labels every true box is drawn."""
    true_boxes = np.asarray(true_boxes, np.float64).reshape(-1, 4)
    if pred is None or len(pred.boxes) == 0:
        return Corrections(draws=len(true_boxes))
    iou = box_iou(pred.boxes, true_boxes)
    pairs = sorted(((iou[i, j], i, j) for i in range(iou.shape[0]) for j in range(iou.shape[1]) if iou[i, j] >= MATCH_IOU),
                   reverse=True)
    used_pred, used_true = set(), set()
    out = Corrections()
    for overlap, i, j in pairs:
        if i in used_pred or j in used_true:
            continue
        used_pred.add(i)
        used_true.add(j)
        if int(pred.labels[i]) == int(true_labels[j]) and overlap >= accept_iou:
            out.accepts += 1
        else:
            out.fixes += 1
    out.draws = len(true_boxes) - len(used_true)
    left = [i for i in range(len(pred.boxes)) if i not in used_pred]
    if left and crowd_boxes is not None and len(crowd_boxes):
        on_crowd = box_iou(pred.boxes[left], crowd_boxes).max(axis=1) >= MATCH_IOU
        left = [i for i, small in zip(left, on_crowd) if not small]
    out.deletes = len(left)
    return out
