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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

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


@torch.no_grad()
def evaluate_detector(detector, coco: CocoSet, *, batch_size: int = 8, progress: bool = False) -> APTable:
    """AP of `detector` (a `Detector`) on the images of `coco`, whose classes must be the detector's."""
    from torch.utils.data import DataLoader
    from torchmetrics.detection import MeanAveragePrecision

    if list(coco.classes) != list(detector.classes):
        raise ValueError(f"evaluation set classes {coco.classes} differ from the detector's {detector.classes}")
    detector.eval()
    device = next(detector.parameters()).device
    metric = MeanAveragePrecision(iou_type="bbox", class_metrics=True)
    metric50 = MeanAveragePrecision(iou_type="bbox", iou_thresholds=[0.5], class_metrics=True)
    loader = DataLoader(DetectionDataset(coco, augment=False), batch_size=batch_size, collate_fn=collate_detection)
    if progress:
        from tqdm import tqdm

        loader = tqdm(loader, desc="evaluating", unit="batch")
    for images, targets in loader:
        preds = detector([im.to(device) for im in images])
        preds = [{k: v.cpu() for k, v in p.items()} for p in preds]
        gts = [{"boxes": t["boxes"].as_subclass(torch.Tensor), "labels": t["labels"]} for t in targets]
        metric.update(preds, gts)
        metric50.update(preds, gts)
    res, res50 = metric.compute(), metric50.compute()
    k = len(coco.classes)
    counts = coco.counts()
    return APTable(
        classes=list(coco.classes),
        ap50=_per_class(res50["map_per_class"], res50["classes"], k),
        ap=_per_class(res["map_per_class"], res["classes"], k),
        map50=float(res["map_50"]),
        map=float(res["map"]),
        images=len(coco.images),
        boxes=[counts[c] for c in coco.classes],
    )


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
