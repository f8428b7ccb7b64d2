"""Hard negatives: `shots --background` (free-play frames with no object in view) and
`train detector --negatives` (a run's candidate negatives, or frames a user marked empty), with
the bad input each refuses in one line."""

import json

import cv2
import numpy as np
import pytest

from playtester.cli import main
from playtester.datasets.detection import DetectionDataModule
from playtester.datasets.negatives import NegativeLog
from playtester.perception.recipes import add_negatives


@pytest.fixture(scope="module")
def shots(tmp_path_factory, small_park):
    out = tmp_path_factory.mktemp("neg") / "shots"
    assert main(["shots", "--game", small_park, "--n", "8", "--background", "3", "--resolution", "160x120",
                 "--out", str(out)]) == 0
    return out


@pytest.mark.slow
def test_background_shots_are_free_play_frames_with_no_object(shots):
    doc = json.loads((shots / "labels.json").read_text())
    backgrounds = {im["id"] for im in doc["images"] if im.get("background")}
    assert len(doc["images"]) == 11 and len(backgrounds) == 3
    assert not any(a["image_id"] in backgrounds for a in doc["annotations"]), "not even a crowd box: nothing in view"
    assert all((shots / im["file_name"]).is_file() for im in doc["images"])


def test_background_shots_start_beside_the_objects_and_anywhere_on_the_level_in_turn():
    """Two targets at (0, 0) and (1000, 0), `far` 100, bounds 0..2000 × 0..2000: starts beside an
    object lie within 100 of one; starts anywhere spread over the bounds, most of them far from both."""
    from playtester.commands.scenario import ShotTarget, background_start

    targets = [ShotTarget("pillar", 0.0, 0.0, 1), ShotTarget("pillar", 1000.0, 0.0, 2)]
    rng = np.random.default_rng(0)
    near = [background_start(targets, 100.0, (0.0, 0.0, 2000.0, 2000.0), rng, anywhere=False) for _ in range(200)]
    assert all(min(np.hypot(x - t.x, y - t.y) for t in targets) <= 100.0 + 1e-9 for x, y in near)
    anywhere = np.array([background_start(targets, 100.0, (0.0, 0.0, 2000.0, 2000.0), rng, anywhere=True) for _ in range(200)])
    assert anywhere.min() >= 0.0 and anywhere.max() <= 2000.0
    far_from_both = [min(np.hypot(x - t.x, y - t.y) for t in targets) > 100.0 for x, y in anywhere]
    assert sum(far_from_both) > 180 and anywhere[:, 1].mean() > 800


def frame(w=160, h=120, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_a_runs_negatives_join_the_training_split_as_backgrounds(shots, tmp_path, capsys):
    run = tmp_path / "run"
    log = NegativeLog(run)
    for step in (4, 9, 9):  # two candidates ended at step 9: neither frame is lost
        log.write(frame(seed=step), 0, step, "unconfirmed", [{"box": [1, 2, 30, 40], "class": "tire", "score": 0.7}])
    log.close()
    records = [json.loads(line) for line in (run / "negatives" / "negatives.jsonl").read_text().splitlines()]
    assert [r["file"] for r in records] == ["images/e0-t4.png", "images/e0-t9.png", "images/e0-t9-2.png"]
    (run / "negatives" / "images" / "e0-t9-2.png").unlink()  # a person weeds one out
    assert records[0]["boxes"] == [{"box": [1.0, 2.0, 30.0, 40.0], "class": "tire", "score": 0.7}]
    marked = tmp_path / "marked"  # frames a user marked empty, listed with the run in a file
    marked.mkdir()
    cv2.imwrite(str(marked / "a.png"), frame(seed=1))
    listing = tmp_path / "negatives.txt"
    listing.write_text("# this week's rounds\nrun\nmarked\n")
    dm = DetectionDataModule(shots / "labels.json", batch_size=2)
    dm.setup("fit")
    before = len(dm.splits["train"].images)
    said = []
    add_negatives(dm, (listing,), said.append)
    added = dm.splits["train"].images[before:]
    assert len(added) == 3 and all(len(im.boxes) == 0 and (im.width, im.height) == (160, 120) for im in added)
    assert len({im.id for im in dm.splits["train"].images}) == before + 3, "fresh ids"
    assert "3 background images" in said[0]
    sample = dm.train_dataloader().dataset[before]  # a background trains as an image with no boxes
    assert tuple(sample.image.shape) == (3, 120, 160) and sample.target["boxes"].shape[0] == 0


def train_with(shots, tmp_path, negatives) -> int:
    return main(["train", "detector", "--coco", str(shots / "labels.json"), "--out", str(tmp_path / "d.ckpt"),
                 "--backbone", "compact", "--pretrained", "none", "--epochs", "1", "--negatives", str(negatives)])


def one_line(capsys, *words):
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("error:") and "Traceback" not in err, err
    for w in words:
        assert w in err, err


def test_bad_negatives_are_refused_in_one_line_before_training(shots, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert train_with(shots, tmp_path, empty) == 2
    one_line(capsys, f"--negatives {empty}", "no images")
    other = tmp_path / "other"
    other.mkdir()
    cv2.imwrite(str(other / "big.png"), frame(320, 240))
    assert train_with(shots, tmp_path, other) == 2
    one_line(capsys, "big.png", "320×240", "160×120")
    listing = tmp_path / "runs.txt"
    listing.write_text("runs/gone\n")
    assert train_with(shots, tmp_path, listing) == 2
    one_line(capsys, "runs/gone", f"{listing} line 1", "no such run folder")
    quiet_run = tmp_path / "quiet-run"  # a run that rejected nothing: its report's images are no negatives
    quiet_run.mkdir()
    (quiet_run / "summary.json").write_text("{}")
    cv2.imwrite(str(quiet_run / "coverage.png"), frame(160, 120))
    assert train_with(shots, tmp_path, quiet_run) == 2
    one_line(capsys, f"--negatives {quiet_run}", "wrote no candidate negatives")
    assert not (tmp_path / "d.ckpt").exists() and not (tmp_path / "logs").exists(), "nothing written"
