"""COCO import (CVAT and Label Studio flavours), bad records named, stratified splits, sets a detector cannot learn from."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from playtester.errors import UserError
from playtester.cli import main
from playtester.datasets.detection import DetectionDataModule, load_coco, split_images


@pytest.fixture(scope="module")
def shots(tmp_path_factory, small_park) -> Path:
    """40 auto-labelled park shots at 160×120 (real engine frames and boxes)."""
    out = tmp_path_factory.mktemp("det-data") / "shots"
    assert main(["shots", "--game", small_park, "--n", "40", "--out", str(out), "--resolution", "160x120"]) == 0
    return out


def _copy(shots: Path, tmp_path: Path) -> tuple[Path, dict]:
    dst = tmp_path / "shots"
    shutil.copytree(shots, dst)
    return dst, json.loads((dst / "labels.json").read_text())


def _write(folder: Path, doc: dict) -> Path:
    path = folder / "labels.json"
    path.write_text(json.dumps(doc))
    return path


def test_loads_real_shots_with_boxes_in_pixels(shots):
    coco = load_coco(shots / "labels.json")
    doc = json.loads((shots / "labels.json").read_text())
    assert coco.classes == ["pillar", "barrel", "tire", "chair"]
    assert len(coco.images) == 40
    crowd = [a for a in doc["annotations"] if a["iscrowd"]]  # the objects under --min-box
    assert sum(coco.counts().values()) == len(doc["annotations"]) - len(crowd)
    assert sum(len(im.crowd_boxes) for im in coco.images) == len(crowd)
    ann = next(a for a in doc["annotations"] if not a["iscrowd"])
    im = next(i for i in coco.images if i.id == ann["image_id"])
    x, y, w, h = ann["bbox"]
    assert (w * h) ** 0.5 >= 15
    row = [list(b) for b in im.boxes].index([x, y, x + w, y + h])  # xywh → xyxy
    names = {c["id"]: c["name"] for c in doc["categories"]}
    assert coco.classes[im.labels[row] - 1] == names[ann["category_id"]]
    assert (im.width, im.height) == (160, 120)


def test_label_studio_and_cvat_flavours_load_alike(shots, tmp_path):
    folder, doc = _copy(shots, tmp_path)
    # Label Studio: category ids from 0, file names with the upload path, floats everywhere
    ls = json.loads(json.dumps(doc))
    ls["categories"] = [{"id": c["id"] - 1, "name": c["name"]} for c in doc["categories"]]
    for a in ls["annotations"]:
        a["category_id"] -= 1
    for im in ls["images"]:
        im["file_name"] = "../../label-studio/data/upload/3/" + Path(im["file_name"]).name
    (folder / "ls").mkdir()
    a = load_coco(_write(folder / "ls", ls), folder / "images")
    # CVAT: ids from 1, extra fields, images folder given explicitly
    cvat = json.loads(json.dumps(doc))
    for ann in cvat["annotations"]:
        ann.update(segmentation=[], occluded=False)
    cvat["licenses"] = [{"name": "", "id": 0, "url": ""}]
    (folder / "cvat").mkdir()
    b = load_coco(_write(folder / "cvat", cvat), folder)
    assert a.classes == b.classes == ["pillar", "barrel", "tire", "chair"]
    assert a.counts() == b.counts()
    for x, y in zip(a.images, b.images):
        assert np.array_equal(x.boxes, y.boxes) and np.array_equal(x.labels, y.labels)


def test_classes_map_by_name_onto_a_given_order(shots):
    coco = load_coco(shots / "labels.json", classes=["chair", "tire", "barrel", "pillar"])
    ref = load_coco(shots / "labels.json")
    for x, y in zip(coco.images, ref.images):
        assert [coco.classes[i - 1] for i in x.labels] == [ref.classes[i - 1] for i in y.labels]
        assert np.array_equal(x.labels, 5 - y.labels)  # chair 1 ↔ 4, tire 2 ↔ 3, …


@pytest.mark.parametrize("case", ["unknown category", "box outside", "missing image", "unreadable image", "no annotations", "size differs"])
def test_bad_records_are_named(shots, tmp_path, case):
    folder, doc = _copy(shots, tmp_path)
    ann = doc["annotations"][3]
    im = next(i for i in doc["images"] if i["id"] == ann["image_id"])
    if case == "unknown category":
        ann["category_id"] = 9
        expected = rf"annotation {ann['id']} \(image {im['id']} '{im['file_name']}'\): unknown category id 9"
    elif case == "box outside":
        ann["bbox"] = [150.0, 10.0, 30.0, 20.0]
        expected = rf"annotation {ann['id']} .*lies outside its 160×120 image"
    elif case == "missing image":
        (folder / im["file_name"]).unlink()
        expected = rf"image {im['id']} \('{im['file_name']}'\): the image file is missing"
    elif case == "unreadable image":
        (folder / im["file_name"]).write_bytes(b"not a png at all")
        expected = rf"image {im['id']} \('{im['file_name']}'\): the image file .* cannot be read"
    elif case == "size differs":
        im["width"] = 320
        expected = rf"image {im['id']} .*says 320×120 but the image is 160×120"
    else:
        doc["annotations"] = []
        expected = "no annotations at all"
    path = _write(folder, doc)
    with pytest.raises(UserError, match=expected):
        load_coco(path)


def test_training_does_not_start_on_bad_data(shots, tmp_path, capsys):
    folder, doc = _copy(shots, tmp_path)
    doc["annotations"][0]["category_id"] = 42
    path = _write(folder, doc)
    out = tmp_path / "det.ckpt"
    code = main(["train", "detector", "--coco", str(path), "--out", str(out), "--pretrained", "none",
                 "--backbone", "mobilenet", "--logdir", str(tmp_path / "logs")])
    assert code == 2
    err = capsys.readouterr().err
    assert "unknown category id 42" in err and "Traceback" not in err
    assert not out.exists() and not (tmp_path / "logs").exists()


@pytest.mark.parametrize("case", ["folder given", "no boxes at all", "a class with under 5 boxes", "one image",
                                  "a category without boxes", "--val-coco of other classes", "--val-coco folder",
                                  "--steps and --epochs"])
def test_train_detector_refuses_unusable_shots_in_one_line(shots, tmp_path, capsys, case):
    folder, doc = _copy(shots, tmp_path)
    coco, extra = folder, []
    if case == "no boxes at all":
        doc["annotations"] = []
        coco = _write(folder, doc)
        expected = "it has no annotations at all"
    elif case == "a class with under 5 boxes":
        chair = next(c["id"] for c in doc["categories"] if c["name"] == "chair")
        chairs = [a for a in doc["annotations"] if a["category_id"] == chair]
        doc["annotations"] = [a for a in doc["annotations"] if a["category_id"] != chair] + chairs[:4]
        coco = _write(folder, doc)
        expected = r"too few training boxes for chair [0-4] \(at least 5 a class"
    elif case == "one image":
        first = next(a["image_id"] for a in doc["annotations"] if not a["iscrowd"])
        doc["images"] = [im for im in doc["images"] if im["id"] == first]
        doc["annotations"] = [a for a in doc["annotations"] if a["image_id"] == first]
        coco = _write(folder, doc)
        expected = re.escape(f"COCO file {coco}: 1 image; a detector learns from many views of each class")
    elif case == "a category without boxes":
        doc["categories"].append({"id": 9, "name": "lamp", "supercategory": "ooi"})
        coco = _write(folder, doc)
        expected = re.escape(f"COCO file {coco}: no box of 'lamp' in any of its 40 images, yet its categories ask for it")
    elif case.startswith("--val-coco"):
        coco = _write(folder, doc)
        other = tmp_path / "val"
        shutil.copytree(folder, other)
        doc["categories"] = [c for c in doc["categories"] if c["name"] != "chair"]
        doc["annotations"] = [a for a in doc["annotations"] if a["category_id"] in {c["id"] for c in doc["categories"]}]
        if case == "--val-coco folder":
            extra = ["--val-coco", str(other)]
            expected = re.escape(f"--val-coco {other}: is a folder; give {other / 'labels.json'}")
        else:
            extra = ["--val-coco", str(_write(other, doc))]
            expected = re.escape(f"--val-coco: its classes (pillar, barrel, tire) differ from those of --coco {coco} "
                                 "(pillar, barrel, tire, chair); give held-out shots labelled with the same classes")
    elif case == "--steps and --epochs":
        coco = _write(folder, doc)
        extra = ["--steps", "10", "--epochs", "2"]
        expected = re.escape("--steps 10 and --epochs 2: give one budget, not both")
    else:
        expected = re.escape(f"--coco {folder}: is a folder; give {folder / 'labels.json'}")
    out = tmp_path / "det.ckpt"
    code = main(["train", "detector", "--coco", str(coco), "--out", str(out), "--logdir", str(tmp_path / "logs"), *extra])
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert code == 2 and "Traceback" not in err
    assert re.search(expected, err), err
    assert not list(tmp_path.glob("det.ckpt*")) and not (tmp_path / "logs").exists()


def test_box_overhanging_by_rounding_is_clipped(shots, tmp_path):
    folder, doc = _copy(shots, tmp_path)
    ann = next(a for a in doc["annotations"] if not a["iscrowd"])
    ann["bbox"] = [150.5, 100.0, 10.2, 20.6]  # 0.7 px past the right, 0.6 px past the bottom
    coco = load_coco(_write(folder, doc))
    im = next(i for i in coco.images if i.id == ann["image_id"])
    assert [150.5, 100.0, 160.0, 120.0] in [list(map(float, b)) for b in im.boxes]


def test_split_is_stratified_disjoint_and_deterministic(shots):
    coco = load_coco(shots / "labels.json")
    ids = split_images(coco, seed=3)
    assert split_images(coco, seed=3) == ids and split_images(coco, seed=4) != ids
    all_ids = ids["train"] + ids["val"] + ids["test"]
    assert sorted(all_ids) == sorted(im.id for im in coco.images) and len(set(all_ids)) == len(all_ids)

    def main_class(im):
        areas = (im.boxes[:, 2] - im.boxes[:, 0]) * (im.boxes[:, 3] - im.boxes[:, 1])
        return int(im.labels[np.argmax(areas)]) if len(im.labels) else 0

    by_id = {im.id: main_class(im) for im in coco.images}
    for label in set(by_id.values()):
        n = sum(1 for v in by_id.values() if v == label)
        got = {s: sum(1 for i in ids[s] if by_id[i] == label) for s in ids}
        assert got["train"] == round(0.7 * n)
        assert got["train"] + got["val"] == round(0.8 * n)


def test_split_of_hand_made_strata():
    """10 images of class 1 and 20 of class 2 → 7/1/2 and 14/2/4."""
    from playtester.datasets.detection import CocoImage, CocoSet

    images = [CocoImage(i, Path("x"), "x", 10, 10, np.array([[0, 0, 5, 5]], np.float32), np.array([1 if i < 10 else 2]))
              for i in range(30)]
    ids = split_images(CocoSet(Path("x"), ["a", "b"], images))
    assert [sum(1 for i in ids[s] if i < 10) for s in ("train", "val", "test")] == [7, 1, 2]
    assert [sum(1 for i in ids[s] if i >= 10) for s in ("train", "val", "test")] == [14, 2, 4]


def test_datamodule_batches_hold_xyxy_boxes(shots):
    dm = DetectionDataModule(shots / "labels.json", batch_size=4, augment=True)
    dm.setup()
    images, targets = next(iter(dm.train_dataloader()))
    assert len(images) == len(targets) == 4
    for im, t in zip(images, targets):
        assert im.dtype.is_floating_point and 0 <= im.min() and im.max() <= 1 and im.shape[0] == 3
        b = t["boxes"]
        assert b.format.name == "XYXY"
        assert (b[:, 2] > b[:, 0]).all() and (b[:, 3] > b[:, 1]).all()
        assert (b[:, 2] <= im.shape[2]).all() and (b[:, 3] <= im.shape[1]).all()
        assert len(t["labels"]) == len(b)


def test_augmentation_follows_the_seed(shots):
    """Albumentations has a generator of its own that the global seeds do not reach: the same
    seed must give the same augmented images (so that training twice with one --seed gives one
    detector), another seed other ones."""
    from playtester.datasets.detection import DetectionDataset

    coco = load_coco(shots / "labels.json")

    def images(seed: int) -> list:
        data = DetectionDataset(coco, augment=True, seed=seed)
        return [data[i].image for i in range(12)]

    a, b, c = images(0), images(0), images(1)
    assert all(x.shape == y.shape and bool((x == y).all()) for x, y in zip(a, b))
    assert not all(x.shape == y.shape and bool((x == y).all()) for x, y in zip(a, c))
