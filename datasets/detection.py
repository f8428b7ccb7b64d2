"""Detection data: COCO import (as CVAT and Label Studio export it), stratified splits, DataModule.

`load_coco` reads and checks a `labels.json` beside its images before any training starts: every
problem is a `UserError` naming the record (unknown category id, box outside its image, missing or
unreadable image, no annotations at all). Category ids are mapped by *name* onto the detector's
classes, so files whose ids differ (Label Studio counts from 0, CVAT from 1) still line up;
label 0 is the background.

`split_images` cuts the images by given fractions, stratified by the class of each image's largest
box (images without boxes form their own stratum), deterministic by seed. `detector_splits` is the
rule a detector was trained under (its config names it): `held-out`, the default, holds out the
share of images that gives every class `HELD_OUT_BOXES` boxes, kept within `HELD_OUT_SHARE`, and
trains on the rest (the held-out images serve both to stop training and to score it); `none`
trains on every image (the held-out shots are another file, `--val-coco`); `70/10/20` is the
fixed split of detectors trained before the adaptive rule.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import lightning as L
import numpy as np

from playtester.errors import UserError

SPLITS = ("train", "val", "test")
SPLIT_RULES = ("held-out", "none", "70/10/20")
"""How a detector's training file was split (`detector_splits`)."""
HELD_OUT_BOXES = 15
"""The held-out images should hold this many boxes of every class, where the set allows."""
HELD_OUT_SHARE = (0.1, 0.2)
"""Least and most of the images held out: a large set is scored on a tenth of it, a small one
keeps four fifths to train on whatever its held-out boxes come to."""
BOX_TOLERANCE = 1.0
"""Pixels a box may overhang its image (annotation tools round); it is clipped back."""


@dataclass
class CocoImage:
    id: int
    path: Path
    file_name: str
    width: int
    height: int
    boxes: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.float32))
    """n×4 float32 `[x0, y0, x1, y1]` pixels."""
    labels: np.ndarray = field(default_factory=lambda: np.zeros((0,), np.int64))
    """n int64 class labels, 1…K (0 is the background)."""
    bugged: np.ndarray = field(default_factory=lambda: np.zeros((0,), bool))
    """n bools: the annotation's `attributes.bug` names a bug (`playtester shots` writes
    `stretched`, `lowres` or `none`); False where the file says nothing."""
    crowd_boxes: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.float32))
    """m×4 boxes marked `iscrowd` (`shots` marks objects too small to ask for): not trained on;
    in scoring a detection on one counts neither way."""
    crowd_labels: np.ndarray = field(default_factory=lambda: np.zeros((0,), np.int64))


@dataclass
class CocoSet:
    """A checked COCO detection file: its classes (label i+1 is `classes[i]`) and images."""

    source: Path
    classes: list[str]
    images: list[CocoImage]

    def counts(self) -> dict[str, int]:
        """Boxes per class."""
        n = np.bincount(np.concatenate([im.labels for im in self.images] or [np.zeros(0, np.int64)]), minlength=len(self.classes) + 1)
        return {c: int(n[i + 1]) for i, c in enumerate(self.classes)}

    def subset(self, ids: Sequence[int]) -> "CocoSet":
        keep = set(int(i) for i in ids)
        return CocoSet(self.source, self.classes, [im for im in self.images if im.id in keep])


def _find_image(images_dir: Path, file_name: str) -> Path | None:
    """The image a record names: relative to the image folder, or by its base name there
    (Label Studio writes paths like `../../media/upload/3/abc.png`, CVAT `images/abc.png`)."""
    candidates = [images_dir / file_name, images_dir / Path(file_name).name, images_dir / "images" / Path(file_name).name]
    for c in candidates:
        if c.is_file():
            return c
    return None


def _image_size(path: Path) -> tuple[int, int] | None:
    """(width, height) of a readable image, None if it cannot be read."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            im.verify()
        with Image.open(path) as im:
            return im.size
    except Exception:
        return None


def load_coco(
    labels: str | Path,
    images_dir: str | Path | None = None,
    *,
    classes: Sequence[str] | None = None,
    check_images: bool = True,
) -> CocoSet:
    """Read and check a COCO detection file; raise a `UserError` naming the first bad record.

    `images_dir` defaults to the file's folder. `classes` fixes the class order (a trained
    detector's); by default it is the file's categories in id order. Crowd annotations are kept
    apart (`crowd_boxes`): not trained on, ignored in scoring. An image whose file is missing or
    unreadable, or whose real size differs from its record, is an error: boxes would land in the
    wrong place.
    """
    labels = Path(labels)
    where = f"COCO file {labels}"
    images_dir = Path(images_dir) if images_dir is not None else labels.parent
    doc = _read_coco_doc(labels, images_dir, where)
    cat_names = _read_categories(doc["categories"], where)
    if classes is None:
        classes = list(dict.fromkeys(cat_names[c] for c in sorted(cat_names)))
    classes = list(classes)
    images = _read_images(doc["images"], images_dir, where, check_images)
    boxes: dict[int, list[_Box]] = {iid: [] for iid in images}
    for i, ann in enumerate(doc["annotations"]):
        box = _read_box(ann, i, where, images, cat_names, classes)
        boxes[box.image_id].append(box)
    if not any(not b.crowd for found in boxes.values() for b in found):
        raise UserError(f"{where}: it has no annotations at all; label some boxes first")
    for iid, im in images.items():
        kept = [b for b in boxes[iid] if not b.crowd]
        crowd = [b for b in boxes[iid] if b.crowd]
        if kept:
            im.boxes = np.array([b.xyxy for b in kept], np.float32)
            im.labels = np.array([b.label for b in kept], np.int64)
            im.bugged = np.array([b.bugged for b in kept], bool)
        if crowd:
            im.crowd_boxes = np.array([b.xyxy for b in crowd], np.float32)
            im.crowd_labels = np.array([b.label for b in crowd], np.int64)
    return CocoSet(labels, classes, list(images.values()))


def _read_coco_doc(labels: Path, images_dir: Path, where: str) -> dict[str, Any]:
    if not labels.is_file():
        raise UserError(f"{where}: not found")
    if not images_dir.is_dir():
        raise UserError(f"image folder {images_dir}: not found (give --images)")
    try:
        doc = json.loads(labels.read_text())
    except json.JSONDecodeError as e:
        raise UserError(f"{where}: not valid JSON ({e})") from None
    except UnicodeDecodeError:
        raise UserError(f"{where}: not a text file") from None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), list) for k in ("images", "annotations", "categories")):
        raise UserError(f"{where}: a COCO detection file needs the lists 'images', 'annotations' and 'categories'")
    return doc


def _read_categories(records: list[Any], where: str) -> dict[int, str]:
    cat_names: dict[int, str] = {}
    for i, cat in enumerate(records):
        try:
            cid, name = int(cat["id"]), str(cat["name"])
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{where}: category #{i} needs an integer 'id' and a 'name'") from None
        if cid in cat_names:
            raise UserError(f"{where}: category id {cid} is defined twice")
        cat_names[cid] = name
    if not cat_names:
        raise UserError(f"{where}: it defines no categories")
    return cat_names


def _read_images(records: list[Any], images_dir: Path, where: str, check_images: bool) -> dict[int, CocoImage]:
    images: dict[int, CocoImage] = {}
    for i, rec in enumerate(records):
        try:
            iid, file_name = int(rec["id"]), str(rec["file_name"])
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{where}: image record #{i} needs an integer 'id' and a 'file_name'") from None
        rwhere = f"{where}: image {iid} ({file_name!r})"
        if iid in images:
            raise UserError(f"{rwhere}: image id {iid} is used twice")
        path = _find_image(images_dir, file_name)
        if path is None:
            raise UserError(f"{rwhere}: the image file is missing from {images_dir}")
        width, height = rec.get("width"), rec.get("height")
        if check_images or not (width and height):
            size = _image_size(path)
            if size is None:
                raise UserError(f"{rwhere}: the image file {path} cannot be read as an image")
            if width and height and (int(width), int(height)) != size:
                raise UserError(f"{rwhere}: the record says {width}×{height} but the image is {size[0]}×{size[1]}")
            width, height = size
        images[iid] = CocoImage(iid, path, file_name, int(width), int(height))
    return images


@dataclass
class _Box:
    image_id: int
    xyxy: list[float]
    label: int
    bugged: bool
    crowd: bool


def _read_box(ann: Any, i: int, where: str, images: dict[int, CocoImage], cat_names: dict[int, str],
              classes: list[str]) -> _Box:
    """One annotation, checked against its image and the classes; its box clipped to the image."""
    aid = ann.get("id", f"#{i}") if isinstance(ann, dict) else f"#{i}"
    awhere = f"{where}: annotation {aid}"
    if not isinstance(ann, dict) or "image_id" not in ann or "category_id" not in ann or "bbox" not in ann:
        raise UserError(f"{awhere}: needs 'image_id', 'category_id' and 'bbox'")
    try:
        iid, cid = int(ann["image_id"]), int(ann["category_id"])
    except (TypeError, ValueError):
        raise UserError(f"{awhere}: 'image_id' and 'category_id' must be integers") from None
    im = images.get(iid)
    if im is None:
        raise UserError(f"{awhere}: refers to image id {iid}, which has no image record")
    awhere += f" (image {iid} {im.file_name!r})"
    if cid not in cat_names:
        defined = ", ".join(f"{c} {n}" for c, n in sorted(cat_names.items()))
        raise UserError(f"{awhere}: unknown category id {cid}; the file defines {defined}")
    name = cat_names[cid]
    if name not in classes:
        raise UserError(f"{awhere}: category {name!r} is not one of the detector's classes ({', '.join(classes)})")
    bbox = ann["bbox"]
    try:
        x, y, w, h = (float(v) for v in bbox)
    except (TypeError, ValueError):
        raise UserError(f"{awhere}: bbox {bbox!r} should be [x, y, width, height]") from None
    if not all(math.isfinite(v) for v in (x, y, w, h)) or w <= 0 or h <= 0:
        raise UserError(f"{awhere}: bbox {bbox!r} has no area")
    t = BOX_TOLERANCE
    if x < -t or y < -t or x + w > im.width + t or y + h > im.height + t:
        raise UserError(f"{awhere}: bbox {bbox!r} lies outside its {im.width}×{im.height} image")
    xyxy = [max(0.0, x), max(0.0, y), min(float(im.width), x + w), min(float(im.height), y + h)]
    attributes = ann.get("attributes")
    bug = attributes.get("bug") if isinstance(attributes, dict) else None
    return _Box(iid, xyxy, classes.index(name) + 1, bool(bug) and str(bug).lower() not in ("none", "false", "0"),
                bool(ann.get("iscrowd", 0)))


def split_images(coco: CocoSet, fractions: tuple[float, float, float] = (0.7, 0.1, 0.2), seed: int = 0) -> dict[str, list[int]]:
    """Image ids per split, stratified by each image's main class (that of its largest box).

    Within each stratum the images are shuffled by `seed`, then cut at the rounded fractions, so
    every class keeps its share in each split (to within one image).
    """
    if len(fractions) != 3 or any(f < 0 for f in fractions) or not math.isclose(sum(fractions), 1.0, abs_tol=1e-6):
        raise UserError(f"split fractions {fractions}: give three non-negative numbers that sum to 1")
    strata: dict[int, list[int]] = {}
    for im in coco.images:
        if len(im.labels):
            areas = (im.boxes[:, 2] - im.boxes[:, 0]) * (im.boxes[:, 3] - im.boxes[:, 1])
            key = int(im.labels[int(np.argmax(areas))])
        else:
            key = 0
        strata.setdefault(key, []).append(im.id)
    rng = np.random.default_rng(seed)
    out: dict[str, list[int]] = {s: [] for s in SPLITS}
    for key in sorted(strata):
        ids = sorted(strata[key])
        rng.shuffle(ids)
        n = len(ids)
        n_train = int(round(n * fractions[0]))
        n_val = int(round(n * (fractions[0] + fractions[1]))) - n_train
        out["train"] += ids[:n_train]
        out["val"] += ids[n_train:n_train + n_val]
        out["test"] += ids[n_train + n_val:]
    return {s: sorted(v) for s, v in out.items()}


def held_out_share(coco: CocoSet, boxes: int = HELD_OUT_BOXES) -> float:
    """The share of images to hold out: what gives the rarest class `boxes` boxes, within
    `HELD_OUT_SHARE`."""
    low, high = HELD_OUT_SHARE
    rarest = min(coco.counts().values(), default=0)
    return high if rarest == 0 else min(high, max(low, boxes / rarest))


def detector_splits(coco: CocoSet, rule: str = "held-out", seed: int = 0, boxes: int = HELD_OUT_BOXES) -> dict[str, CocoSet]:
    """The train, val and test images of a detector's training file under `rule` (see the module's
    docstring); under `held-out` val and test are the same held-out images, under `none` both are
    empty."""
    if rule == "70/10/20":
        ids = split_images(coco, seed=seed)
        return {s: coco.subset(ids[s]) for s in SPLITS}
    if rule == "none":
        return {"train": coco, "val": coco.subset([]), "test": coco.subset([])}
    if rule != "held-out":
        raise UserError(f"split rule {rule!r}: one of {', '.join(SPLIT_RULES)}")
    share = held_out_share(coco, boxes)
    ids = split_images(coco, (1 - share, share, 0.0), seed=seed)
    held_out = coco.subset(ids["val"])
    return {"train": coco.subset(ids["train"]), "val": held_out, "test": held_out}


def read_rgb(path: Path) -> np.ndarray:
    """An image file as uint8 H×W×3 RGB."""
    import cv2

    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise UserError(f"image {path}: cannot be read")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


class DetectionSample(NamedTuple):
    image: Any
    """float32 3×H×W tensor in [0, 1]."""
    target: dict[str, Any]
    """`boxes` (tv_tensors.BoundingBoxes, XYXY), `labels` (int64), `image_id`."""


def train_augmentation(min_visibility: float = 0.4, seed: int = 0):
    """Box-aware augmentation for game frames: flips, small zoom/shift, colour and blur.

    Albumentations draws from its own generator, which the global seeds do not reach: without
    `seed` every run augmented differently, and a detector trained twice with the same --seed
    came out different (held-out loss 1.06 to 19 after one epoch in the detector test)."""
    import albumentations as A

    return A.Compose(
        [
            A.HorizontalFlip(p=0.5),
            A.Affine(scale=(0.85, 1.2), translate_percent=(-0.08, 0.08), p=0.5),
            A.RandomBrightnessContrast(brightness_limit=0.2, contrast_limit=0.2, p=0.5),
            A.HueSaturationValue(hue_shift_limit=5, sat_shift_limit=15, val_shift_limit=10, p=0.3),
            A.GaussianBlur(blur_limit=(3, 3), p=0.1),
        ],
        bbox_params=A.BboxParams(format="pascal_voc", label_fields=["labels"], min_visibility=min_visibility, clip=True),
        seed=seed,
    )


class DetectionDataset:
    """Images of a `CocoSet` as (image tensor, target) pairs, optionally augmented. With `crowd`
    (for scoring, not augmented) a target also holds the image's crowd boxes, `crowd_boxes` and
    `crowd_labels`, which a score ignores."""

    def __init__(self, coco: CocoSet, augment: bool = False, seed: int = 0, crowd: bool = False) -> None:
        if augment and crowd:
            raise ValueError("DetectionDataset: crowd boxes are for scoring; they are not augmented")
        self.images = coco.images
        self.transform = train_augmentation(seed=seed) if augment else None
        self.crowd = crowd

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> DetectionSample:
        import torch
        from torchvision import tv_tensors

        im = self.images[i]
        rgb = read_rgb(im.path)
        boxes, labels = im.boxes, im.labels
        if self.transform is not None:
            out = self.transform(image=rgb, bboxes=boxes, labels=labels)
            rgb = out["image"]
            boxes = np.asarray(out["bboxes"], np.float32).reshape(-1, 4)
            labels = np.asarray(out["labels"], np.int64).reshape(-1)
        h, w = rgb.shape[:2]
        image = torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1).float().div_(255.0)
        target = {
            "boxes": tv_tensors.BoundingBoxes(torch.as_tensor(boxes, dtype=torch.float32), format="XYXY", canvas_size=(h, w)),
            "labels": torch.as_tensor(labels, dtype=torch.int64),
            "image_id": im.id,
        }
        if self.crowd:
            target["crowd_boxes"] = torch.from_numpy(im.crowd_boxes).float().reshape(-1, 4)
            target["crowd_labels"] = torch.from_numpy(im.crowd_labels)
        return DetectionSample(image, target)


def collate_detection(batch: list[DetectionSample]) -> tuple[list[Any], list[dict[str, Any]]]:
    """Detection batches stay lists: images differ in size and box count."""
    return [b.image for b in batch], [b.target for b in batch]


class DetectionDataModule(L.LightningDataModule):
    """Train/val/test loaders over one checked COCO file (plus optional base-class shots), split by
    `split` (`detector_splits`); with `val_labels` the held-out images are that file's.

    The files are read and checked in `setup` (once; the command calls it before training so that
    bad data stops everything before a model is built). Base-class samples (few-shot fine-tuning
    "as in TFA": keep showing the classes the model already knows) join the training split only.
    """

    def __init__(
        self,
        labels: str | Path,
        images: str | Path | None = None,
        *,
        classes: Sequence[str] | None = None,
        base_labels: str | Path | None = None,
        base_images: str | Path | None = None,
        base_shots: int = 0,
        batch_size: int = 8,
        augment: bool = True,
        seed: int = 0,
        workers: int = 0,
        split: str = "held-out",
        held_out_boxes: int = HELD_OUT_BOXES,
        val_labels: str | Path | None = None,
    ) -> None:
        super().__init__()
        self.labels, self.images_dir = Path(labels), images
        self.split, self.held_out_boxes, self.val_labels = split, held_out_boxes, val_labels
        self.classes = list(classes) if classes is not None else None
        self.base_labels, self.base_images, self.base_shots = base_labels, base_images, base_shots
        self.batch_size, self.augment, self.seed, self.workers = batch_size, augment, seed, workers
        self.coco: CocoSet | None = None
        self.splits: dict[str, CocoSet] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.coco is not None:
            return
        if self.base_labels is not None:
            base = load_coco(self.base_labels, self.base_images)
            if self.classes is None:
                main_classes = load_coco(self.labels, self.images_dir, check_images=False).classes
                self.classes = list(dict.fromkeys(main_classes + base.classes))
            base = load_coco(self.base_labels, self.base_images, classes=self.classes)
        coco = load_coco(self.labels, self.images_dir, classes=self.classes)
        self.classes = coco.classes
        self.splits = detector_splits(coco, "none" if self.val_labels is not None else self.split, self.seed, self.held_out_boxes)
        if self.val_labels is not None:
            held_out = load_coco(self.val_labels, classes=self.classes)
            self.splits.update(val=held_out, test=held_out)
        if self.base_labels is not None and self.base_shots > 0:
            picked = _shots_per_class(base, self.base_shots, self.seed)
            train = self.splits["train"]
            self.splits["train"] = CocoSet(train.source, train.classes, train.images + picked)
        self.coco = coco

    def _loader(self, split: str, shuffle: bool, augment: bool):
        from torch.utils.data import DataLoader

        data = DetectionDataset(self.splits[split], augment=augment, seed=self.seed, crowd=split != "train")
        return DataLoader(
            data, batch_size=self.batch_size, shuffle=shuffle, collate_fn=collate_detection,
            num_workers=self.workers, persistent_workers=self.workers > 0,
        )

    def train_dataloader(self):
        return self._loader("train", True, self.augment)

    def val_dataloader(self):
        return self._loader("val", False, False)

    def test_dataloader(self):
        return self._loader("test", False, False)


def _shots_per_class(coco: CocoSet, shots: int, seed: int) -> list[CocoImage]:
    """Up to `shots` images per class (by main class), for base-class mixing."""
    ids = split_images(coco, (1.0, 0.0, 0.0), seed=seed)["train"]
    rng = np.random.default_rng(seed)
    by_class: dict[int, list[CocoImage]] = {}
    for im in coco.images:
        if im.id in ids and len(im.labels):
            by_class.setdefault(int(np.bincount(im.labels).argmax()), []).append(im)
    picked: list[CocoImage] = []
    for key in sorted(by_class):
        group = by_class[key]
        order = rng.permutation(len(group))[:shots]
        picked += [group[i] for i in order]
    return picked
