"""Detector evaluation: per-class AP50 and AP@[.5:.95] (torchmetrics `MeanAveragePrecision`),
laid out like the paper's Table I."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from playtester.datasets.detection import CocoSet, DetectionDataset, collate_detection


@dataclass
class APTable:
    """AP per class and over all classes, as fractions (NaN where a class has no test boxes)."""

    classes: list[str]
    ap50: list[float]
    ap: list[float]
    map50: float
    map: float
    images: int
    boxes: list[int]
    ap50_interval: list[tuple[float, float]] | None = None
    """Per class, the 90 % bootstrap interval of AP50 over the scored images (`ap50_intervals`),
    where it was measured."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> dict[str, Any]:
        """`{"classes": {name: {"ap50", "ap", "boxes"}}, "all": {...}, "images": n}`, NaN as null
        (a class without test boxes has no AP)."""

        def num(v: float) -> float | None:
            return float(v) if np.isfinite(v) else None

        per_class = {c: {"ap50": num(a50), "ap": num(a), "boxes": int(n)} for c, n, a50, a in zip(self.classes, self.boxes, self.ap50, self.ap)}
        if self.ap50_interval is not None:
            for row, (lo, hi) in zip(per_class.values(), self.ap50_interval):
                row["ap50_interval"] = [num(lo), num(hi)]
        return {"classes": per_class, "all": {"ap50": num(self.map50), "ap": num(self.map), "boxes": int(sum(self.boxes))},
                "images": self.images}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "APTable":
        def num(v: float | None) -> float:
            return float("nan") if v is None else float(v)

        classes = list(doc["classes"])
        rows = [doc["classes"][c] for c in classes]
        interval = [tuple(num(v) for v in r["ap50_interval"]) for r in rows] if all("ap50_interval" in r for r in rows) else None
        return cls(classes, [num(r["ap50"]) for r in rows], [num(r["ap"]) for r in rows], num(doc["all"]["ap50"]),
                   num(doc["all"]["ap"]), int(doc.get("images", 0)), [int(r["boxes"]) for r in rows], interval)

    def rows(self) -> list[tuple[str, int, float, float]]:
        return [(c, n, a50, a) for c, n, a50, a in zip(self.classes, self.boxes, self.ap50, self.ap)] + [
            ("all", sum(self.boxes), self.map50, self.map)
        ]

    def markdown(self) -> str:
        def pct(v: float) -> str:
            return "–" if not np.isfinite(v) else f"{100 * v:.1f} %"

        lines = ["| class | test boxes | AP50 | AP@[.5:.95] |", "|---|---:|---:|---:|"]
        lines += [f"| {c} | {n} | {pct(a50)} | {pct(a)} |" for c, n, a50, a in self.rows()]
        return "\n".join(lines)


def _per_class(values: torch.Tensor, classes_seen: torch.Tensor, n_classes: int) -> list[float]:
    out = [float("nan")] * n_classes
    values = values.reshape(-1)
    for label, v in zip(classes_seen.reshape(-1).tolist(), values.tolist()):
        if 1 <= int(label) <= n_classes:
            out[int(label) - 1] = float("nan") if v < 0 else float(v)
    return out


VARIANTS = ("all", "healthy", "bugged")
"""Which ground-truth boxes an AP table scores: every box, or only those of one variant (the
others are marked crowd, so detections on them count neither way)."""


@torch.no_grad()
def predict_set(detector, coco: CocoSet, *, batch_size: int = 8, progress: bool = False) -> list[dict[str, torch.Tensor]]:
    """The detector's raw detections (every score) on each image of `coco`, in order."""
    from torch.utils.data import DataLoader

    if list(coco.classes) != list(detector.classes):
        raise ValueError(f"evaluation set classes {coco.classes} differ from the detector's {detector.classes}")
    detector.eval()
    device = next(detector.parameters()).device
    loader = DataLoader(DetectionDataset(coco, augment=False), batch_size=batch_size, collate_fn=collate_detection)
    if progress:
        from rich.progress import track

        loader = track(loader, description="evaluating", total=len(loader))
    preds: list[dict[str, torch.Tensor]] = []
    for images, _ in loader:
        preds += [{k: v.cpu() for k, v in p.items()} for p in detector([im.to(device) for im in images])]
    return preds


def ap_table(preds: list[dict[str, torch.Tensor]], coco: CocoSet, variant: str = "all", *, min_side: float = 0.0,
             image_size: int = 128) -> APTable:
    """Per-class AP50 and AP@[.5:.95] of `preds` (one per image of `coco`) on the boxes of `variant`.

    `min_side` > 0 scores only boxes whose sqrt(width·height) is at least that many pixels once
    the image is scaled to fit `image_size` (as the detector sees it); smaller ones are ignored
    like the other variant's (COCO's area ranges do the same), and so are the file's crowd boxes."""
    from torchmetrics.detection import MeanAveragePrecision

    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: one of {VARIANTS}")
    # pycocotools (COCO's own evaluation code) computes the AP behind torchmetrics
    metric = MeanAveragePrecision(iou_type="bbox", class_metrics=True, backend="pycocotools")
    metric50 = MeanAveragePrecision(iou_type="bbox", iou_thresholds=[0.5], class_metrics=True, backend="pycocotools")
    k = len(coco.classes)
    counted = np.zeros(k + 1, np.int64)
    for pred, im in zip(preds, coco.images):
        scored = np.ones(len(im.labels), bool) if variant == "all" else (im.bugged == (variant == "bugged"))
        if min_side > 0:
            scale = image_size / max(im.width, im.height)
            sides = np.sqrt(np.clip(im.boxes[:, 2] - im.boxes[:, 0], 0, None) * np.clip(im.boxes[:, 3] - im.boxes[:, 1], 0, None))
            scored &= sides * scale >= min_side
        counted += np.bincount(im.labels[scored], minlength=k + 1)
        ignored = np.concatenate([~scored, np.ones(len(im.crowd_labels), bool)])
        gt = {"boxes": torch.from_numpy(np.concatenate([im.boxes, im.crowd_boxes])).float().reshape(-1, 4),
              "labels": torch.from_numpy(np.concatenate([im.labels, im.crowd_labels])),
              "iscrowd": torch.from_numpy(ignored).long()}
        metric.update([pred], [gt])
        metric50.update([pred], [gt])
    res, res50 = metric.compute(), metric50.compute()
    return APTable(
        classes=list(coco.classes),
        ap50=_per_class(res50["map_per_class"], res50["classes"], k),
        ap=_per_class(res["map_per_class"], res["classes"], k),
        map50=float(res["map_50"]),
        map=float(res["map"]),
        images=len(coco.images),
        boxes=[int(n) for n in counted[1:]],
    )


@torch.no_grad()
def evaluate_detector(detector, coco: CocoSet, *, batch_size: int = 8, progress: bool = False) -> APTable:
    """AP of `detector` (a `Detector`) on the images of `coco`, whose classes must be the detector's."""
    return ap_table(predict_set(detector, coco, batch_size=batch_size, progress=progress), coco)


@torch.no_grad()
def evaluate_variants(detector, coco: CocoSet, *, batch_size: int = 8, progress: bool = False) -> dict[str, APTable]:
    """AP tables over all boxes, the healthy ones and the bugged ones, from one pass of the detector."""
    preds = predict_set(detector, coco, batch_size=batch_size, progress=progress)
    return {v: ap_table(preds, coco, v) for v in VARIANTS}


@torch.no_grad()
def detection_loss(detector, coco: CocoSet, *, batch_size: int = 8) -> float:
    """Mean summed Faster R-CNN training loss of `detector` on the images of `coco`, without
    changing it (BatchNorm statistics are read, not updated): a learning signal on held-out
    shots that moves long before AP does."""
    from torch.utils.data import DataLoader

    was_training = detector.training
    detector.train()
    for m in detector.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.eval()
    device = next(detector.parameters()).device
    loader = DataLoader(DetectionDataset(coco, augment=False), batch_size=batch_size, collate_fn=collate_detection)
    total, n = 0.0, 0
    g = torch.random.get_rng_state()
    torch.manual_seed(0)  # the RPN and box head sample proposals at random
    for images, targets in loader:
        targets = [{"boxes": t["boxes"].to(device), "labels": t["labels"].to(device)} for t in targets]
        losses = detector([im.to(device) for im in images], targets)
        total += float(sum(losses.values())) * len(images)
        n += len(images)
    torch.random.set_rng_state(g)
    detector.train(was_training)
    return total / max(1, n)


def _iou(det: np.ndarray, gt: np.ndarray, crowd: np.ndarray) -> np.ndarray:
    """pycocotools' IoU of boxes (n×4, m×4 XYXY): over a crowd box, the intersection over the
    detection's own area."""
    x0 = np.maximum(det[:, None, 0], gt[None, :, 0])
    y0 = np.maximum(det[:, None, 1], gt[None, :, 1])
    x1 = np.minimum(det[:, None, 2], gt[None, :, 2])
    y1 = np.minimum(det[:, None, 3], gt[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area_d = ((det[:, 2] - det[:, 0]) * (det[:, 3] - det[:, 1]))[:, None]
    area_g = ((gt[:, 2] - gt[:, 0]) * (gt[:, 3] - gt[:, 1]))[None, :]
    union = np.where(crowd[None, :], area_d, area_d + area_g - inter)
    return inter / np.maximum(union, 1e-12)


def _match50(det: np.ndarray, scores: np.ndarray, gt: np.ndarray, crowd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """COCO's greedy matching at IoU 0.5 in one image and class (pycocotools' `evaluateImg`):
    detections by score, each to the best-overlapping free box, real boxes before crowd ones.
    Returns the detections' scores in that order, whether each matched, whether each is ignored
    (matched to a crowd box)."""
    order = np.argsort(-scores, kind="mergesort")[:100]
    det, scores = det[order], scores[order]
    g_order = np.argsort(crowd, kind="mergesort")  # real boxes first
    gt, crowd = gt[g_order], crowd[g_order]
    ious = _iou(det, gt, crowd) if len(det) and len(gt) else np.zeros((len(det), len(gt)))
    taken = np.zeros(len(gt), bool)
    matched, ignored = np.zeros(len(det), bool), np.zeros(len(det), bool)
    for d in range(len(det)):
        best, m = min(0.5, 1 - 1e-10), -1
        for g in range(len(gt)):
            if taken[g] and not crowd[g]:
                continue
            if m > -1 and not crowd[m] and crowd[g]:
                break
            if ious[d, g] < best:
                continue
            best, m = ious[d, g], g
        if m > -1:
            matched[d], ignored[d] = True, crowd[m]
            taken[m] = True
    return scores, matched, ignored


def _ap101(scores: np.ndarray, matched: np.ndarray, ignored: np.ndarray, weights: np.ndarray, n_boxes: float) -> float:
    """COCO's 101-point interpolated AP of detections (each counted `weights` times) against
    `n_boxes` boxes; NaN without boxes."""
    if n_boxes <= 0:
        return float("nan")
    keep = ~ignored
    order = np.argsort(-scores[keep], kind="mergesort")
    w = weights[keep][order]
    hit = matched[keep][order]
    tp, fp = np.cumsum(w * hit), np.cumsum(w * ~hit)
    recall = tp / n_boxes
    precision = tp / np.maximum(tp + fp, np.finfo(np.float64).eps)
    precision = np.maximum.accumulate(precision[::-1])[::-1]
    at = np.searchsorted(recall, np.linspace(0, 1, 101), side="left")
    return float(np.where(at < len(precision), precision[np.minimum(at, len(precision) - 1)], 0.0).mean()) if len(w) else 0.0


def ap50_intervals(preds: list[dict[str, torch.Tensor]], coco: CocoSet, *, resamples: int = 1000, level: float = 0.9,
                   seed: int = 0) -> list[tuple[float, float]]:
    """Per class, the `level` bootstrap interval of AP50 over the images of `coco`: the images are
    drawn with replacement `resamples` times and AP50 computed COCO's way on each draw (crowd boxes
    ignored, as in `ap_table`). On a few held-out boxes a class the interval is wide: that is
    what it is for. (NaN, NaN) for a class without boxes."""
    k = len(coco.classes)
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(len(coco.images), np.full(len(coco.images), 1 / len(coco.images)), size=resamples)
    out = []
    for label in range(1, k + 1):
        cols: list[np.ndarray] = [np.zeros(0)] * 3
        owner, per_image_boxes = [], np.zeros(len(coco.images))
        for i, (pred, im) in enumerate(zip(preds, coco.images)):
            mine = (pred["labels"] == label).numpy()
            real = im.labels == label
            gt = np.concatenate([im.boxes[real], im.crowd_boxes[im.crowd_labels == label]]).reshape(-1, 4)
            crowd = np.arange(len(gt)) >= int(real.sum())
            found = _match50(pred["boxes"].numpy()[mine], pred["scores"].numpy()[mine], gt, crowd)
            cols = [np.concatenate([c, f]) for c, f in zip(cols, found)]
            owner.append(np.full(len(found[0]), i))
            per_image_boxes[i] = real.sum()
        scores, matched, ignored = cols[0], cols[1].astype(bool), cols[2].astype(bool)
        owner_ids = np.concatenate(owner).astype(int) if owner else np.zeros(0, int)
        if per_image_boxes.sum() == 0:
            out.append((float("nan"), float("nan")))
            continue
        aps = np.array([_ap101(scores, matched, ignored, draw[owner_ids].astype(np.float64), float(draw @ per_image_boxes))
                        for draw in draws])
        aps = aps[np.isfinite(aps)]
        tail = (1 - level) / 2
        out.append((float(np.quantile(aps, tail)), float(np.quantile(aps, 1 - tail))) if len(aps) else (float("nan"), float("nan")))
    return out
