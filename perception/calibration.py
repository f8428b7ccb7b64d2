"""Per-class score thresholds picked for a target precision on held-out shots.

One confidence threshold for every class treats a detector as if its scores meant the same for
each class; they do not (a tire at 0.6 may be right far less often than a barrel at 0.6). Here
each class gets the lowest threshold at which its detections on held-out shots are right at least
`target` of the time (a detection is right when it boxes an unclaimed labelled object of its
class at IoU ≥ 0.5, the AP50 rule; one on a crowd box counts neither way), so that it keeps as
much recall as that precision allows. Shots with background images in them (`shots --background`)
make the count of wrong detections closer to free play's.

The thresholds are kept in the detector's checkpoint (`checkpoint["playtester"]["thresholds"]`),
shown by `eval detector`, and used by a tester run in place of one `--min-score`, but only when
the images they were picked on held at least `MIN_BACKGROUNDS` background images: on framed shots
alone few detections are wrong, and the thresholds picked there are low (pillar 0.28, barrel 0.29
on the demo's held-out shots) and let in more phantoms in free play than one 0.6 does; picked on
shots with as many background images as object shots they halve the phantoms at 0.6's recall
(docs/benchmarks/real-tests.md).

A run takes a class's threshold only where it is above `RUN_FLOOR`, the score a run needs where
nothing is calibrated: the calibration images hold an object in most frames, free play in few, so
a threshold that is right 9 times in 10 there is right far less often in play. Picked among the
shots of a stock level (Freedoom 2 MAP01: 0.22–0.48) they made 12 confirmed targets of which 2
real on free-play walks, against 2 of 3 at 0.6; so calibration may raise a class's threshold,
never lower it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

TARGET_PRECISION = 0.9
"""The precision each class's threshold is picked for, unless asked otherwise."""
LOWEST = 0.05
"""Detections below this score are not looked at."""
KEY = "thresholds"
"""Where a checkpoint keeps them, under its `playtester` entry."""
MIN_BACKGROUNDS = 20
"""Background images (no box) the calibration images must hold for a run to use the thresholds."""
RUN_FLOOR = 0.6
"""The score a run needs where nothing is calibrated, and the least a calibrated class needs."""


@dataclass
class ClassThreshold:
    threshold: float
    """Detections of the class at this score or more are taken."""
    precision: float | None
    """Their precision on the held-out shots (None: no detection of the class at all)."""
    recall: float
    """The share of the class's held-out boxes they find."""
    reached: bool
    """Whether `precision` reaches the target (else the threshold is the one of best precision)."""


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of one box against n boxes (`[x0, y0, x1, y1]`)."""
    if len(b) == 0:
        return np.zeros(0)
    ix = np.clip(np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0]), 0, None)
    iy = np.clip(np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1]), 0, None)
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-9), 0.0)


def scored_detections(predictions, images, label: int) -> tuple[np.ndarray, np.ndarray, int]:
    """`(scores, right, boxes)` of one class over the images: each detection's score, whether it
    is right (greedy by score, each labelled box claimed once), and the class's labelled boxes."""
    scores, right, total = [], [], 0
    for (boxes, labels, dscores), im in zip(predictions, images):
        gt = im.boxes[im.labels == label]
        crowd = im.crowd_boxes[im.crowd_labels == label]
        total += len(gt)
        claimed = np.zeros(len(gt), bool)
        mine = np.flatnonzero(labels == label)
        for i in mine[np.argsort(-dscores[mine], kind="stable")]:
            ious = _iou(boxes[i], gt)
            free = np.where(claimed, -1.0, ious)
            if len(free) and free.max() >= 0.5:
                claimed[int(free.argmax())] = True
                scores.append(dscores[i])
                right.append(True)
            elif len(crowd) and _iou(boxes[i], crowd).max() >= 0.5:
                continue  # on an object too small to ask for: neither way
            else:
                scores.append(dscores[i])
                right.append(False)
    return np.asarray(scores, np.float64), np.asarray(right, bool), total


def pick_threshold(scores: np.ndarray, right: np.ndarray, total: int, target: float, floor: float = LOWEST) -> ClassThreshold:
    """The lowest score whose detections at or above it reach `target` precision (hand-checkable:
    sort by score, running precision at each cut). None reach it: the cut of best precision."""
    if len(scores) == 0:
        return ClassThreshold(1.0, None, 0.0, False)
    order = np.argsort(-scores, kind="stable")
    s, r = scores[order], right[order]
    hits = np.cumsum(r)
    precision = hits / np.arange(1, len(s) + 1)
    cuts = [i for i in range(len(s)) if i == len(s) - 1 or s[i + 1] < s[i]]  # equal scores go together
    ok = [i for i in cuts if precision[i] >= target]
    i = ok[-1] if ok else max(cuts, key=lambda j: (precision[j], -j))
    recall = float(hits[i] / total) if total else 0.0
    return ClassThreshold(float(max(s[i], floor)), float(precision[i]), recall, bool(ok))


def calibrate(detector, images, target: float = TARGET_PRECISION, batch_size: int = 8) -> dict[str, Any]:
    """Each class's threshold for `target` precision on `images` (`CocoImage`s: held-out shots);
    the checkpoint entry: `{"target_precision", "images", "backgrounds", "classes": {name: ClassThreshold
    as a dict}}`, `backgrounds` the images with no box (a run uses the thresholds only when there are
    `MIN_BACKGROUNDS` of them: `usable`)."""
    from playtester.datasets.detection import read_rgb

    predictions = []
    for start in range(0, len(images), batch_size):
        frames = [read_rgb(im.path) for im in images[start:start + batch_size]]
        predictions += detector.predict(frames, score_threshold=LOWEST)
    classes = {}
    for label, name in enumerate(detector.classes, start=1):
        classes[name] = asdict(pick_threshold(*scored_detections(predictions, images, label), target))
    return {"target_precision": target, "images": len(images), "backgrounds": background_count(images), "classes": classes}


def background_count(images) -> int:
    """The images (`CocoImage`s) with no box at all, not even a crowd one."""
    return sum(len(im.boxes) == 0 and len(im.crowd_boxes) == 0 for im in images)


def usable(entry: dict[str, Any] | None) -> bool:
    """Whether a run uses an entry's thresholds: picked on images with `MIN_BACKGROUNDS` backgrounds."""
    return entry is not None and int(entry.get("backgrounds", 0)) >= MIN_BACKGROUNDS


def unused_why(entry: dict[str, Any]) -> str:
    """Why a run does not use an entry's thresholds (one line's end)."""
    return (f"picked on {entry['images']} images of which {entry.get('backgrounds', 0)} background images, fewer than "
            f"{MIN_BACKGROUNDS}: on framed shots alone they come out too low for free play; a run uses 0.6 instead "
            f"(make shots with `shots --background N`)")


def thresholds_of(entry: dict[str, Any] | None, even_unusable: bool = False) -> dict[str, float]:
    """`{class: threshold}` a run takes from a checkpoint's entry: each class's kept threshold, or
    `RUN_FLOOR` where that is higher; empty when it has none, or when it is not `usable`. With
    `even_unusable` (the benchmark's look at them), the kept thresholds as they are."""
    if entry is None or not (even_unusable or usable(entry)):
        return {}
    kept = {c: float(v["threshold"]) for c, v in (entry.get("classes") or {}).items()}
    return kept if even_unusable else {c: max(t, RUN_FLOOR) for c, t in kept.items()}


def read_thresholds(path: str | Path, even_unusable: bool = False) -> dict[str, float]:
    """The per-class thresholds a detector checkpoint keeps for a run; empty for one trained before
    them or without background images to pick them on (see `thresholds_of`)."""
    import torch

    ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    return thresholds_in(ckpt.get("playtester") or {}, even_unusable)


def thresholds_in(notes: dict[str, Any], even_unusable: bool = False) -> dict[str, float]:
    """`read_thresholds` from a detector checkpoint's notes (`load_detector_with_notes`), read already."""
    return thresholds_of(notes.get(KEY), even_unusable)


def store_thresholds(path: str | Path, entry: dict[str, Any]) -> None:
    """Write `entry` into a detector checkpoint (atomically: the file is replaced whole)."""
    import io

    import torch

    from playtester.files import write_bytes_atomic

    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    ckpt.setdefault("playtester", {})[KEY] = entry
    buf = io.BytesIO()
    torch.save(ckpt, buf)
    write_bytes_atomic(Path(path), buf.getvalue())
