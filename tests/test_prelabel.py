"""Labelling with the model's help: the cost model and the uncertainty against hand-worked
values, and `shots --demos … --prelabel` end to end on park demos with a real (tiny) detector."""

import json

import numpy as np
import pytest

from playtester.cli import main
from playtester.perception.prelabel import (Corrections, Prelabels, binary_entropy, box_iou, corrections,
                                            frame_uncertainty, most_uncertain_first, prelabels_of)


def test_box_iou_by_hand():
    a = np.array([[0, 0, 10, 10]])
    b = np.array([[5, 0, 15, 10], [0, 0, 10, 10], [20, 20, 30, 30]])
    # half overlap: 50 / (100 + 100 - 50) = 1/3; the same box: 1; apart: 0
    assert box_iou(a, b) == pytest.approx(np.array([[1 / 3, 1.0, 0.0]]))


def test_uncertainty_is_the_largest_binary_entropy_of_the_candidates():
    assert binary_entropy(np.array([0.5]))[0] == pytest.approx(1.0)
    # H(0.9) = -(0.9 log2 0.9 + 0.1 log2 0.1) = 0.4690
    assert frame_uncertainty([0.9, 0.99]) == pytest.approx(0.4690, abs=1e-4)
    assert frame_uncertainty([0.9, 0.5]) == pytest.approx(1.0)
    assert frame_uncertainty([0.04, 0.03]) == 0.0, "below the candidate floor: the detector saw nothing"
    assert frame_uncertainty([]) == 0.0
    drafts = [prelabels_of(np.zeros((1, 4)), np.array([1]), np.array([s]), 0.5) for s in (0.99, 0.5, 0.8, 0.99)]
    assert most_uncertain_first(drafts) == [1, 2, 0, 3], "ties keep their order"
    assert [len(d.boxes) for d in drafts] == [1, 1, 1, 1]
    assert len(prelabels_of(np.zeros((2, 4)), np.array([1, 2]), np.array([0.7, 0.3]), 0.5).boxes) == 1


def draft(boxes, labels):
    return Prelabels(np.array(boxes, np.float32).reshape(-1, 4), np.array(labels), np.ones(len(labels), np.float32), 0.0)


def test_corrections_by_hand():
    truth = np.array([[0, 0, 10, 10], [20, 0, 30, 10], [40, 0, 50, 10], [60, 0, 70, 10]], np.float32)
    labels = np.array([1, 1, 2, 2])
    pred = draft([[0, 0, 10, 10],      # exact, right class: accept
                  [20, 0, 30, 10],     # exact, wrong class: fix
                  [40, 0, 50, 14],     # right class, IoU 100/140 = 0.71 < 0.8: fix (drag a corner)
                  [100, 0, 110, 10],   # over nothing: delete
                  [200, 0, 204, 4]],   # over a box too small to ask for (crowd): left alone
                 [1, 2, 2, 1, 1])
    got = corrections(pred, truth, labels, crowd_boxes=np.array([[200, 0, 204, 4]], np.float32))
    assert got == Corrections(accepts=1, fixes=2, draws=1, deletes=1)  # the fourth true box was missed: a draw
    assert got.actions == 4
    assert corrections(None, truth, labels) == Corrections(draws=4), "without pre-labels every box is drawn"
    # the lenient model: any match of the right class at IoU 0.5 is accepted (the loose box too)
    lenient = corrections(pred, truth, labels, crowd_boxes=np.array([[200, 0, 204, 4]], np.float32), accept_iou=0.5)
    assert lenient == Corrections(accepts=2, fixes=1, draws=1, deletes=1)
    # two pre-labels on one box: the closer is matched, the other deleted
    twice = corrections(draft([[0, 0, 10, 10], [1, 0, 10, 10]], [1, 1]), truth[:1], labels[:1])
    assert twice == Corrections(accepts=1, deletes=1)


@pytest.fixture(scope="module")
def park_demos(tmp_path_factory, small_park):
    out = tmp_path_factory.mktemp("prelabel") / "demos"
    assert main(["demos", "--game", small_park, "--behavior", "inspect", "--episodes", "2", "--steps", "30",
                 "--out", str(out)]) == 0
    return out


@pytest.mark.slow
def test_shots_with_prelabels_are_predictions_most_uncertain_first(park_demos, tiny_detector, tmp_path, monkeypatch):
    from playtester.datasets.detection import load_coco
    from playtester.perception import prelabel
    from playtester.perception.detector import load_detector

    monkeypatch.setattr(prelabel, "PRELABEL_SCORE", 0.1)  # the tiny detector, trained one step, is never sure

    out = tmp_path / "to-label"
    assert main(["shots", "--demos", str(park_demos), "--every", "6", "--prelabel", str(tiny_detector), "--out", str(out)]) == 0
    doc = json.loads((out / "labels.json").read_text())
    detector = load_detector(tiny_detector)
    assert [c["name"] for c in doc["categories"]] == detector.classes
    assert doc["info"]["prelabels"]["order"] == "most uncertain first" and doc["info"]["prelabels"]["score_threshold"] == 0.1
    assert len(doc["images"]) == 2 * 5  # 30 steps, one frame in 6, two episodes
    uncertainty = [im["uncertainty"] for im in doc["images"]]
    assert uncertainty == sorted(uncertainty, reverse=True) and uncertainty[0] > uncertainty[-1]
    assert [im["file_name"] for im in doc["images"]] == [f"images/{i:06d}.png" for i in range(10)], "file order is label order"
    # the first image's uncertainty and boxes are the detector's on that very frame
    from playtester.datasets.episodes import Episode

    first = doc["images"][0]
    frame = np.asarray(Episode.open(park_demos / first["episode"]).frames[first["t"]])
    boxes, _, scores = detector.predict([frame], score_threshold=0.05)[0]
    assert first["uncertainty"] == pytest.approx(frame_uncertainty(scores), abs=1e-4)
    mine = [a for a in doc["annotations"] if a["image_id"] == first["id"]]
    assert mine and all(a["attributes"]["source"] == "prelabel" and 0 <= a["score"] <= 1 and a["iscrowd"] == 0 for a in mine)
    assert sorted(a["score"] for a in mine) == pytest.approx(sorted(s for b, s in zip(boxes, scores) if s >= 0.1
                                                                     and np.sqrt((b[2] - b[0]) * (b[3] - b[1])) >= 15), abs=1e-4)
    # what CVAT or Label Studio hand back after correction is read by `train detector`'s loader
    coco = load_coco(out / "labels.json", classes=detector.classes)
    assert sum(len(im.boxes) for im in coco.images) == len(doc["annotations"])


@pytest.mark.slow
def test_prelabel_bad_input_is_one_line(park_demos, one_step_detector, tmp_path, capsys, small_park):
    import torch

    (tmp_path / "other").mkdir()
    other = one_step_detector(tmp_path / "other", ["--game", small_park, "--n", "4", "--resolution", "160x120",
                                                    "--classes", "pillar,barrel"], backbone="compact")
    capsys.readouterr()
    assert main(["shots", "--demos", str(park_demos), "--prelabel", str(other), "--out", str(tmp_path / "a")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--prelabel" in err and "pillar, barrel" in err and "differ from the shots'" in err and "Traceback" not in err
    assert not (tmp_path / "a").exists(), "nothing written"
    torch.save({"weights": torch.zeros(2)}, tmp_path / "not-a-detector.ckpt")
    assert main(["shots", "--demos", str(park_demos), "--prelabel", str(tmp_path / "not-a-detector.ckpt"),
                 "--out", str(tmp_path / "b")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("error: --prelabel") and "not a playtester checkpoint" in err
    assert main(["shots", "--game", small_park, "--prelabel", str(other), "--out", str(tmp_path / "c")]) == 2
    assert "--demos" in capsys.readouterr().err
