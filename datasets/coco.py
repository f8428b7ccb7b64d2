"""COCO detection files, as CVAT and Label Studio export them: `labels.json` beside an image folder.

This module writes them (auto-labelled shots from the engine, frames to label by hand). Boxes
come in as `[x0, y0, x1, y1]` pixels and are stored the COCO way, `[x, y, width, height]`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterable

import cv2
import numpy as np

from playtester.files import write_bytes_atomic, write_text_atomic
from playtester.errors import UserError
from playtester.capture.park.layout import OOI_KINDS

PARK_CATEGORIES = [{"id": i + 1, "name": kind, "supercategory": "ooi"} for i, kind in enumerate(OOI_KINDS)]
"""The park's four OOI kinds; id 0 stays free for the detector's background class."""


def box_size(box: Iterable[float]) -> float:
    """sqrt(width·height) of an `[x0, y0, x1, y1]` box: the size COCO's area ranges and `--min-box` use."""
    x0, y0, x1, y1 = box
    return float(max(0.0, x1 - x0) * max(0.0, y1 - y0)) ** 0.5


class CocoWriter:
    """Collects images and boxes, writes `images/NNNNNN.png` as it goes and `labels.json` at the end."""

    def __init__(self, out_dir: str | Path, categories: list[dict[str, Any]] | None = None, *, image_dir: str = "images") -> None:
        self.out_dir = Path(out_dir)
        if not self.out_dir.parent.exists():
            raise UserError(f"output folder {self.out_dir}: its parent {self.out_dir.parent} does not exist; create it first")
        self.images_dir = self.out_dir / image_dir
        self.images_dir.mkdir(parents=True, exist_ok=True)
        self.image_dir = image_dir
        self.categories = categories if categories is not None else PARK_CATEGORIES
        self._cat_ids = {c["name"]: c["id"] for c in self.categories}
        self.images: list[dict[str, Any]] = []
        self.annotations: list[dict[str, Any]] = []
        self.counts = {c["name"]: 0 for c in self.categories}

    def add(self, frame: np.ndarray, objects: Iterable[dict[str, Any]] = (), *, min_box: float = 0, **extra: Any) -> int:
        """Save one RGB frame with its objects (`class`, `box` [x0,y0,x1,y1], optional `bug`, and
        `score` for a detector's box: a pre-label, written with its `score` as COCO's results
        carry it and `attributes.source: prelabel`).

        A box whose size, sqrt(width·height), is under `min_box` pixels is written as a crowd box
        (`iscrowd: 1`): too small to ask a detector for, so neither trained on nor scored
        (a detection on it counts neither way), and left out of `counts`."""
        image_id = len(self.images) + 1
        name = f"{image_id - 1:06d}.png"
        ok, buf = cv2.imencode(".png", cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2BGR))
        if not ok:
            raise RuntimeError("PNG encoding failed")
        write_bytes_atomic(self.images_dir / name, buf.tobytes())
        h, w = frame.shape[:2]
        self.images.append({"id": image_id, "file_name": f"{self.image_dir}/{name}", "width": int(w), "height": int(h), **extra})
        for obj in objects:
            cat = self._cat_ids.get(obj["class"])
            if cat is None:
                continue
            x0, y0, x1, y1 = (float(v) for v in obj["box"])
            x0, y0, x1, y1 = max(0.0, x0), max(0.0, y0), min(float(w), x1), min(float(h), y1)
            if x1 <= x0 or y1 <= y0:
                continue
            small = box_size((x0, y0, x1, y1)) < min_box
            ann = {
                "id": len(self.annotations) + 1, "image_id": image_id, "category_id": cat,
                "bbox": [x0, y0, x1 - x0, y1 - y0], "area": (x1 - x0) * (y1 - y0), "iscrowd": int(small),
                "attributes": {"bug": obj.get("bug") or "none"},
            }
            if "score" in obj:
                ann["score"] = round(float(obj["score"]), 4)
                ann["attributes"]["source"] = "prelabel"
            self.annotations.append(ann)
            self.counts[obj["class"]] += not small
        return image_id

    def close(self, **info: Any) -> Path:
        doc = {
            "info": {"description": "playtester detection shots", "date_created": time.strftime("%Y-%m-%d"), **info},
            "images": self.images,
            "annotations": self.annotations,
            "categories": self.categories,
        }
        path = self.out_dir / "labels.json"
        write_text_atomic(path, json.dumps(doc))
        return path
