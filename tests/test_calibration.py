"""Per-class score thresholds for a target precision: the pick by hand, the count of right and
wrong detections by hand, the checkpoint round trip, and `eval detector` showing and keeping them."""

import json
import re
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from playtester.cli import main
from playtester.datasets.detection import CocoImage
from playtester.perception.calibration import (MIN_BACKGROUNDS, background_count, pick_threshold, read_thresholds,
                                                scored_detections, store_thresholds)


def test_the_lowest_threshold_that_keeps_the_target_precision():
    scores = np.array([0.95, 0.9, 0.8, 0.7, 0.6, 0.5])
    right = np.array([True, True, False, True, True, False])
    # running precision by cut: 1, 1, 2/3, 3/4, 4/5, 4/6; ten labelled boxes
    t = pick_threshold(scores, right, 10, target=0.8)
    assert (t.threshold, t.precision, t.recall, t.reached) == (0.6, 0.8, 0.4, True)
    t = pick_threshold(scores, right, 10, target=0.9)
    assert (t.threshold, t.precision, t.recall) == (0.9, 1.0, 0.2)
    # never reached: the cut of best precision
    t = pick_threshold(np.array([0.9, 0.8]), np.array([False, True]), 2, target=0.9)
    assert (t.threshold, t.precision, t.reached) == (0.8, 0.5, False)
    assert pick_threshold(np.array([]), np.array([], bool), 3, 0.9).precision is None


def test_equal_scores_are_cut_together():
    t = pick_threshold(np.array([0.9, 0.7, 0.7]), np.array([True, True, False]), 3, target=0.75)
    assert t.threshold == 0.9  # at 0.7 both come in: 2/3 < 0.75


def test_right_and_wrong_detections_by_hand():
    im = CocoImage(1, None, "a.png", 100, 100, boxes=np.array([[10, 10, 30, 30], [50, 50, 70, 70]], np.float32),
                   labels=np.array([1, 2]), crowd_boxes=np.array([[80, 80, 84, 84]], np.float32), crowd_labels=np.array([1]))
    boxes = np.array([[11, 10, 31, 30], [10, 10, 30, 30], [80, 80, 84, 84], [50, 50, 70, 70], [0, 60, 10, 70]], np.float32)
    labels = np.array([1, 1, 1, 2, 1])
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5], np.float32)
    s, r, total = scored_detections([(boxes, labels, scores)], [im], label=1)
    # the 0.9 box claims the tire; the 0.8 one on it again is wrong; the crowd one counts neither way; the last is wrong
    assert s.tolist() == pytest.approx([0.9, 0.8, 0.5]) and r.tolist() == [True, False, False] and total == 1


def with_backgrounds(shots: Path, out: Path, n: int) -> Path:
    """A copy of a shots folder with `n` blank frames of its images' size added, each without a box."""
    shutil.copytree(shots.parent, out)
    doc = json.loads(shots.read_text())
    first = doc["images"][0]
    folder = Path(first["file_name"]).parent
    for i in range(n):
        name = str(folder / f"blank-{i}.png")
        cv2.imwrite(str(out / name), np.full((first["height"], first["width"], 3), 90, np.uint8))
        doc["images"].append({"id": 10_000 + i, "file_name": name, "width": first["width"], "height": first["height"]})
    (out / "labels.json").write_text(json.dumps(doc))
    return out / "labels.json"


@pytest.mark.slow
def test_eval_detector_picks_shows_and_keeps_thresholds(tiny_detector, tmp_path, capsys):
    ckpt = tmp_path / "det.ckpt"
    shutil.copy(tiny_detector, ckpt)
    shots = tiny_detector.parent / "shots" / "labels.json"
    assert read_thresholds(ckpt) == {}
    assert main(["eval", "detector", "--ckpt", str(ckpt), "--coco", str(shots), "--split", "all"]) == 0
    assert "no per-class score thresholds" in capsys.readouterr().out
    # framed shots alone: thresholds picked there are too low for free play, so none is kept
    assert main(["eval", "detector", "--ckpt", str(ckpt), "--coco", str(shots), "--split", "all",
                 "--target-precision", "0.5", "--store"]) == 2
    err = capsys.readouterr().err
    assert "0 background images" in err and "shots --background" in err and "Traceback" not in err
    assert read_thresholds(ckpt) == {}
    mixed = with_backgrounds(shots, tmp_path / "mixed", MIN_BACKGROUNDS)
    assert main(["eval", "detector", "--ckpt", str(ckpt), "--coco", str(mixed), "--split", "all",
                 "--target-precision", "0.5", "--store"]) == 0
    out = capsys.readouterr().out
    assert "per-class score thresholds" in out and "kept these thresholds" in out and "not used by a run" not in out
    takes = out[out.index("a run takes"):].split(":", 1)[1]  # never below 0.6, whatever was kept
    assert all(float(v) >= 0.6 for v in re.findall(r"\d\.\d\d", takes))
    kept = read_thresholds(ckpt)
    assert set(kept) == {"pillar", "barrel", "tire", "chair"} and all(0.05 <= v <= 1.0 for v in kept.values())
    store_thresholds(ckpt, {"target_precision": 0.9, "images": 30, "backgrounds": MIN_BACKGROUNDS,
                            "classes": {"tire": {"threshold": 0.7}}})
    assert read_thresholds(ckpt) == {"tire": 0.7}
    assert main(["eval", "detector", "--ckpt", str(ckpt), "--coco", str(shots), "--store"]) == 2
    assert "--target-precision" in capsys.readouterr().err


def test_a_run_uses_thresholds_only_when_picked_among_background_images(tmp_path):
    ckpt = tmp_path / "det.ckpt"
    torch.save({"playtester": {}}, ckpt)
    entry = {"target_precision": 0.9, "images": 40, "classes": {"tire": {"threshold": 0.3}, "chair": {"threshold": 0.8}}}
    for backgrounds, used in ((None, False), (0, False), (MIN_BACKGROUNDS - 1, False), (MIN_BACKGROUNDS, True)):
        store_thresholds(ckpt, entry if backgrounds is None else {**entry, "backgrounds": backgrounds})
        # a run never goes below RUN_FLOOR (0.6): the tire's 0.3 is raised, the chair's 0.8 kept
        assert read_thresholds(ckpt) == ({"tire": 0.6, "chair": 0.8} if used else {})
        assert read_thresholds(ckpt, even_unusable=True) == {"tire": 0.3, "chair": 0.8}


def test_background_images_are_counted():
    box = np.array([[1, 1, 5, 5]], np.float32)
    images = [CocoImage(0, "a", "a", 8, 8, boxes=box, labels=np.array([1])), CocoImage(1, "b", "b", 8, 8),
              CocoImage(2, "c", "c", 8, 8, crowd_boxes=box, crowd_labels=np.array([1]))]
    assert background_count(images) == 1  # a frame with only an object too small to ask for is not empty
