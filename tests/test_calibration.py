"""Per-class score thresholds for a target precision: the pick by hand, the count of right and
wrong detections by hand, the checkpoint round trip, and `eval detector` showing and keeping them."""

import shutil

import numpy as np
import pytest

from playtester.cli import main
from playtester.datasets.detection import CocoImage
from playtester.perception.calibration import pick_threshold, read_thresholds, scored_detections, store_thresholds


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


@pytest.mark.slow
def test_eval_detector_picks_shows_and_keeps_thresholds(tiny_detector, tmp_path, capsys):
    ckpt = tmp_path / "det.ckpt"
    shutil.copy(tiny_detector, ckpt)
    shots = tiny_detector.parent / "shots" / "labels.json"
    assert read_thresholds(ckpt) == {}
    assert main(["eval", "detector", "--ckpt", str(ckpt), "--coco", str(shots), "--split", "all"]) == 0
    assert "no per-class score thresholds" in capsys.readouterr().out
    assert main(["eval", "detector", "--ckpt", str(ckpt), "--coco", str(shots), "--split", "all",
                 "--target-precision", "0.5", "--store"]) == 0
    out = capsys.readouterr().out
    assert "per-class score thresholds" in out and "kept these thresholds" in out
    kept = read_thresholds(ckpt)
    assert set(kept) == {"pillar", "barrel", "tire", "chair"} and all(0.05 <= v <= 1.0 for v in kept.values())
    store_thresholds(ckpt, {"target_precision": 0.9, "images": 1, "classes": {"tire": {"threshold": 0.7}}})
    assert read_thresholds(ckpt) == {"tire": 0.7}
    assert main(["eval", "detector", "--ckpt", str(ckpt), "--coco", str(shots), "--store"]) == 2
    assert "--target-precision" in capsys.readouterr().err
